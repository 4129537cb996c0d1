package mongotest

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// changeStream is the state of one change-stream cursor: where it is in the
// oplog, what it has already returned, and how it shapes events.
type changeStream struct {
	// Scope: cluster (db == ""), database (coll == "") or collection.
	db, coll string

	pipeline      *mql.Pipeline
	fullDocument  string
	fullDocBefore string
	showExpanded  bool
	showMigration bool   // showMigrationEvents: a shard's fromMigrate writes too
	nextSeq       int64  // next oplog entry to scan
	skipThrough   string // skip events whose token data is <= this (resume point)
	mustFind      bool   // the resume token names an event that must be found
	split         bool   // the pipeline ends with $changeStreamSplitLargeEvent
	// Resuming from a fragment of a split event: the event is found again,
	// and its fragments up to resumeFragment (0-based) are dropped.
	resumeFragment int
	dropFragments  int
	found          bool
	pbrt           bson.D // current postBatchResumeToken
	pbrtData       string
	buffered       []streamEvent // produced but not yet returned
	bufferedBytes  int64
	matchOnly      bool // the user pipeline only filters: events keep their shape
	invalidated    bool // an invalidate event has been produced
	// invalidateTok and invalidateData are the token of an invalidate the
	// user's pipeline filtered out.
	invalidateTok  bson.D
	invalidateData string
	done           bool // invalidate returned: close the cursor
	killOnce       sync.Once
	killed         chan struct{}
	// passResume, on a shard's stream a mongos merges (needsMerge), lets
	// the resume token's event through: the mongos checks that it finds
	// it (the token may name another shard's event, so the shard does not).
	passResume bool
}

// streamEvent is an event ready to return: the event as produced (before
// the user's pipeline), its encoded output and its token data for ordering.
type streamEvent struct {
	doc    bson.D
	raw    bson.Raw
	data   string
	tokDoc bson.D // the fragment's token, for fragments of a split event
}

// splitEvent cuts an event over 16 MiB into fragments, as
// $changeStreamSplitLargeEvent does: each fragment carries its own resume
// token (the event's, with fragmentNum), splitEvent {fragment, of} and as
// many of the event's top-level fields, in order, as fit in 16 MiB. A single
// field too large for a fragment fails with BSONObjectTooLarge.
func splitEvent(ev bson.D, tok resumetoken.Token) ([]streamEvent, error) {
	const overhead = 1024 // token, splitEvent and framing
	limit := maxBatchBytes - overhead
	var groups [][]bson.E
	var cur []bson.E
	size := 0
	for _, el := range ev {
		if el.Key == "_id" {
			continue
		}
		s := int(docSize(bson.D{el}))
		if s > limit {
			return nil, errorf(mongoerr.CodeBSONObjectTooLarge, "BSONObj size: %d (0x%X) is invalid. Size must be between 0 and 16793600(16MB): field %q of a change event is too large even for $changeStreamSplitLargeEvent", s, s, el.Key)
		}
		if size+s > limit && len(cur) > 0 {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, el)
		size += s
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	out := make([]streamEvent, 0, len(groups))
	for i, g := range groups {
		n := i
		ft := tok
		ft.FragmentNum = &n
		data, bits := ft.Encode()
		id := bson.D{{Key: "_data", Value: data}}
		if bits != nil {
			id = append(id, bson.E{Key: "_typeBits", Value: bson.Binary{Subtype: 0, Data: bits}})
		}
		doc := append(bson.D{{Key: "_id", Value: id}, {Key: "splitEvent", Value: bson.D{
			{Key: "fragment", Value: int32(i + 1)}, {Key: "of", Value: int32(len(groups))}}}}, g...)
		raw, err := bson.Marshal(doc)
		if err != nil {
			return nil, errorf(mongoerr.CodeInternalError, "cannot encode change event fragment: %v", err)
		}
		out = append(out, streamEvent{doc: doc, raw: raw, data: data, tokDoc: id})
	}
	return out, nil
}

func (cs *changeStream) kill() { cs.killOnce.Do(func() { close(cs.killed) }) }

// shape identifies how the stream's options shape an event, for the
// per-entry encoding cache; false when events cannot be shared (a reshaping
// pipeline, or updateLookup, which reads the current document).
func (cs *changeStream) shape() (uint8, bool) {
	if cs.pipeline != nil && !cs.matchOnly || cs.fullDocument == "updateLookup" {
		return 0, false
	}
	var s uint8
	if cs.showExpanded {
		s |= 1
	}
	switch cs.fullDocument {
	case "whenAvailable":
		s |= 2
	case "required":
		s |= 4
	}
	switch cs.fullDocBefore {
	case "whenAvailable":
		s |= 8
	case "required":
		s |= 16
	}
	return s, true
}

// Stages MongoDB allows after $changeStream.
var changeStreamStages = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true, "$changeStreamSplitLargeEvent": true,
}

// splitStageRefused is the error of a server that does not know
// $changeStreamSplitLargeEvent: a release before 7.0 and 6.0.9, or an
// Atlas shared-tier cluster (AtlasSharedTier), whose proxy refuses the
// stage before the server sees it. Nil when the stage is available.
func (e *engine) splitStageRefused() error {
	switch {
	case e.cfg.atlasShared:
		return atlasRefusal("$changeStreamSplitLargeEvent")
	case !e.cfg.release.hasSplitStage():
		return errorf(40324, "Unrecognized pipeline stage name: '$changeStreamSplitLargeEvent'")
	}
	return nil
}

// usesOperator reports whether any document or array within v has a
// field named op.
func usesOperator(v any, op string) bool {
	switch x := v.(type) {
	case bson.D:
		for _, el := range x {
			if el.Key == op || usesOperator(el.Value, op) {
				return true
			}
		}
	case bson.A:
		for _, el := range x {
			if usesOperator(el, op) {
				return true
			}
		}
	}
	return false
}

// openChangeStream handles aggregate with a leading $changeStream stage.
// Callers hold e.mu.
func (e *engine) openChangeStream(r *request, pipeline bson.A) (bson.D, error) {
	if e.cfg.standalone {
		return nil, errorf(40573, "The $changeStream stage is only supported on replica sets")
	}
	spec, ok := pipeline[0].(bson.D)
	if !ok {
		return nil, errorf(mongoerr.CodeFailedToParse, "A pipeline stage specification object must contain exactly one field.")
	}
	opts, ok := spec[0].Value.(bson.D)
	if !ok {
		return nil, errorf(mongoerr.CodeFailedToParse, "the $changeStream stage specification must be an object, got %s", typeName(spec[0].Value))
	}
	cs := &changeStream{db: r.db, killed: make(chan struct{}), resumeFragment: -1, dropFragments: -1}
	var ns string
	switch target := r.cmd[0].Value.(type) {
	case string:
		cs.coll = target
		ns = r.db + "." + target
	default:
		if n, ok := asInt64(target); !ok || n != 1 {
			return nil, errorf(mongoerr.CodeFailedToParse, "Invalid aggregate namespace")
		}
		ns = r.db + ".$cmd.aggregate"
	}
	var resumeAfter, startAfter bson.D
	var startAt *bson.Timestamp
	allForCluster := false
	allowConfig := false
	merging := mql.Truthy(lookupD(r.cmd, "needsMerge")) // a mongos' shard stream
	for _, o := range opts {
		if (o.Key == "fullDocumentBeforeChange" || o.Key == "showExpandedEvents") && !e.cfg.release.hasImages() {
			// Both are new in 6.0; before, the spec's parser knows neither.
			return nil, errorf(mongoerr.CodeIDLUnknownField, "BSON field '$changeStream.%s' is an unknown field.", o.Key)
		}
		switch o.Key {
		case "resumeAfter":
			resumeAfter, ok = o.Value.(bson.D)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field '$changeStream.resumeAfter' is the wrong type '%s', expected type 'object'", typeName(o.Value))
			}
		case "startAfter":
			startAfter, ok = o.Value.(bson.D)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field '$changeStream.startAfter' is the wrong type '%s', expected type 'object'", typeName(o.Value))
			}
		case "startAtOperationTime":
			ts, ok := o.Value.(bson.Timestamp)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field '$changeStream.startAtOperationTime' is the wrong type '%s', expected type 'timestamp'", typeName(o.Value))
			}
			startAt = &ts
		case "fullDocument":
			s, _ := o.Value.(string)
			if !e.cfg.release.hasImages() && s != "default" && s != "updateLookup" {
				// Before 6.0 (no post-images), as 5.0 words it.
				return nil, errorf(40575, "unrecognized value for the 'fullDocument' option to the $changeStream stage. Expected \"default\" or \"updateLookup\", got \"%v\"", o.Value)
			}
			switch s {
			case "default", "updateLookup", "whenAvailable", "required":
				cs.fullDocument = s
			default:
				return nil, errorf(mongoerr.CodeBadValue, "'%v' is not a valid value for $changeStream.fullDocument", o.Value)
			}
		case "fullDocumentBeforeChange":
			s, _ := o.Value.(string)
			switch s {
			case "off", "whenAvailable", "required":
				cs.fullDocBefore = s
			default:
				return nil, errorf(mongoerr.CodeBadValue, "'%v' is not a valid value for $changeStream.fullDocumentBeforeChange", o.Value)
			}
		case "showExpandedEvents":
			cs.showExpanded = mql.Truthy(o.Value)
		case "allChangesForCluster":
			allForCluster = mql.Truthy(o.Value)
		case "showMigrationEvents":
			cs.showMigration = mql.Truthy(o.Value)
		case "allowToRunOnConfigDB":
			allowConfig = mql.Truthy(o.Value)
		case "allowToRunOnSystemNS", "showSystemEvents", "showRawUpdateDescription", "$_generateV2ResumeTokens":
		default:
			return nil, errorf(mongoerr.CodeIDLUnknownField, "BSON field '$changeStream.%s' is an unknown field.", o.Key)
		}
	}
	switch {
	case allForCluster:
		if r.db != "admin" || cs.coll != "" {
			return nil, errorf(mongoerr.CodeInvalidOptions, "$changeStream may only be run with allChangesForCluster on the admin database with {aggregate: 1}")
		}
		cs.db = ""
		ns = "admin.$cmd.aggregate"
	case r.db == "config" && allowConfig && merging:
		// The config server's stream a mongos opens (config.shards).
	case r.db == "admin" || r.db == "local" || r.db == "config":
		return nil, errorf(mongoerr.CodeInvalidNamespace, "$changeStream may not be opened on the internal %s database", r.db)
	case strings.HasPrefix(cs.coll, "system."):
		return nil, errorf(mongoerr.CodeInvalidNamespace, "$changeStream may not be opened on the internal %s.%s collection", r.db, cs.coll)
	}
	if resumeAfter != nil && startAfter != nil {
		return nil, errorf(50865, "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage")
	}
	if startAt != nil && (resumeAfter != nil || startAfter != nil) {
		return nil, errorf(40674, "Only one type of resume option is allowed, but multiple were found.")
	}
	// The stages after $changeStream.
	rest := pipeline[1:]
	for i, st := range rest {
		sd, ok := st.(bson.D)
		if !ok || len(sd) != 1 {
			return nil, errorf(mongoerr.CodeFailedToParse, "A pipeline stage specification object must contain exactly one field.")
		}
		if sd[0].Key == "$changeStream" {
			return nil, errorf(mongoerr.CodeChangeStreamNotFirstStage, "$changeStream is only valid as the first stage in a pipeline")
		}
		if sd[0].Key == "$changeStreamSplitLargeEvent" {
			if err := e.splitStageRefused(); err != nil {
				return nil, err
			}
			if i != len(rest)-1 {
				return nil, errorf(7182802, "$changeStreamSplitLargeEvent must be the last stage in the pipeline")
			}
			cs.split = true
		}
	}
	if !e.cfg.release.hasHashedIndexKey() && usesOperator(rest, "$toHashedIndexKey") {
		return nil, errorf(mongoerr.CodeInvalidPipelineOperator, "Unrecognized expression '$toHashedIndexKey'")
	}
	if len(rest) > 0 {
		var userStages bson.A
		for _, st := range rest {
			if st.(bson.D)[0].Key != "$changeStreamSplitLargeEvent" {
				userStages = append(userStages, st)
			}
		}
		p, err := mql.CompilePipeline(userStages)
		if err != nil {
			return nil, err
		}
		for _, name := range p.StageNames() {
			if !changeStreamStages[name] {
				return nil, errorf(mongoerr.CodeIllegalOperation, "%s is not permitted in a $changeStream pipeline", name)
			}
		}
		if len(userStages) > 0 {
			cs.pipeline = p
			cs.matchOnly = true
			for _, name := range p.StageNames() {
				cs.matchOnly = cs.matchOnly && name == "$match"
			}
		}
	}

	// Where the stream starts.
	first := e.oplog.first()
	last := e.oplog.last()
	switch {
	case resumeAfter != nil || startAfter != nil:
		tokDoc, field := resumeAfter, "resumeAfter"
		if startAfter != nil {
			tokDoc, field = startAfter, "startAfter"
		}
		raw, err := bson.Marshal(tokDoc)
		if err != nil {
			return nil, errorf(mongoerr.CodeBadValue, "invalid resume token: %v", err)
		}
		tok, err := resumetoken.Parse(raw)
		if err != nil {
			return nil, err
		}
		if tok.FromInvalidate && field == "resumeAfter" {
			return nil, errorf(mongoerr.CodeInvalidResumeToken, "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification: %s", tokenString(tokDoc))
		}
		if cs.coll != "" && tok.TokenType == resumetoken.TypeEvent && tok.UUID == nil && tok.EventIdentifier != nil && !isDDLToken(tok) {
			return nil, errorf(mongoerr.CodeInvalidResumeToken, "Attempted to resume a single-collection stream, but the resume token does not include a UUID.")
		}
		if tsLess(tok.ClusterTime, first.ts) {
			return nil, historyLost()
		}
		data, _ := tok.Encode()
		cs.skipThrough = data
		if tok.FragmentNum != nil {
			// A fragment of a split event: find the event, then skip
			// the fragments already returned.
			base := tok
			base.FragmentNum = nil
			cs.skipThrough, _ = base.Encode()
			cs.resumeFragment = *tok.FragmentNum
		}
		cs.mustFind = tok.TokenType == resumetoken.TypeEvent
		if merging {
			cs.mustFind = false
			cs.passResume = cs.resumeFragment < 0 && !tok.FromInvalidate && tok.TokenType == resumetoken.TypeEvent
		}
		cs.nextSeq = e.oplog.seqAtOrAfter(tok.ClusterTime)
		cs.setPBRT(tok.Document(), data)
	case startAt != nil:
		if tsLess(*startAt, first.ts) {
			return nil, historyLost()
		}
		cs.nextSeq = e.oplog.seqAtOrAfter(*startAt)
		cs.setHWM(*startAt)
	default:
		start := bson.Timestamp{T: last.ts.T, I: last.ts.I + 1}
		cs.nextSeq = e.oplog.nextSeq
		cs.setHWM(start)
	}

	batchSize, err := batchSizeArg(cursorOpts(r), 101)
	if err != nil {
		return nil, err
	}
	cur := e.newCursor(ns, r.db, nil, nil, cs)
	batch, err := e.streamBatch(cs, batchSize, e.newOplogReader(cs.nextSeq, true))
	if err != nil {
		delete(e.cursors, cur.id)
		return nil, err
	}
	id := cur.id
	if cs.done {
		delete(e.cursors, cur.id)
		id = 0
	}
	return streamReply(true, id, ns, batch, cs.pbrt), nil
}

func historyLost() *cmdError {
	return errorf(mongoerr.CodeChangeStreamHistoryLost, "Executor error during aggregate command on namespace :: caused by :: Resume of change stream was not possible, as the resume point may no longer be in the oplog.")
}

func tokenString(d bson.D) string {
	if s, ok := lookupD(d, "_data").(string); ok {
		return "{_data: \"" + s + "\"}"
	}
	return "{}"
}

func isDDLToken(t resumetoken.Token) bool {
	for _, e := range t.EventIdentifier {
		if e.Key == "operationDescription" {
			return true
		}
	}
	return false
}

func (cs *changeStream) setPBRT(doc bson.D, data string) {
	if data > cs.pbrtData {
		cs.pbrt, cs.pbrtData = doc, data
	}
}

func (cs *changeStream) setHWM(ts bson.Timestamp) {
	t := resumetoken.Token{ClusterTime: ts, Version: 2, TokenType: resumetoken.TypeHighWaterMark}
	data, _ := t.Encode()
	cs.setPBRT(t.Document(), data)
}

// streamBatch returns up to n events (n < 0: no count limit; n == 0: an
// empty batch) without waiting, reading the oplog through rd. Callers hold
// the stream's cursor (or e.mu, while the stream is being opened).
func (e *engine) streamBatch(cs *changeStream, n int, rd *oplogReader) ([]bson.Raw, error) {
	var batch []bson.Raw
	if cs.done {
		return batch, nil
	}
	if n == 0 {
		return batch, nil
	}
	var size int64
	for {
		// Refill the buffer from the oplog.
		if len(cs.buffered) == 0 && !cs.invalidated {
			if err := e.scan(cs, n-len(batch), rd); err != nil {
				return nil, err
			}
		}
		if len(cs.buffered) == 0 {
			break
		}
		ev := cs.buffered[0]
		s := int64(len(ev.raw))
		if len(batch) > 0 && size+s > maxBatchBytes {
			break
		}
		cs.buffered[0] = streamEvent{}
		cs.buffered = cs.buffered[1:]
		cs.bufferedBytes -= s
		batch = append(batch, ev.raw)
		size += s
		if ev.tokDoc != nil {
			cs.pbrt, cs.pbrtData = ev.tokDoc, ev.data
		} else {
			cs.pbrt, cs.pbrtData = lookupD(ev.doc, "_id").(bson.D), ev.data
		}
		if isInvalidate(ev.doc) {
			cs.done = true
			break
		}
		if n > 0 && len(batch) >= n {
			break
		}
	}
	if len(cs.buffered) == 0 && cs.invalidated {
		// The invalidate was filtered out: close the cursor, the batch's
		// postBatchResumeToken the invalidate's (MongoDB's
		// change_stream_check_resumability.js), so a stream can startAfter it.
		cs.done = true
		if cs.invalidateTok != nil {
			cs.pbrt, cs.pbrtData = cs.invalidateTok, cs.invalidateData
		}
	}
	if len(cs.buffered) == 0 && !cs.done {
		// Everything scanned has been returned: the token may move up to the
		// scan position.
		if last := rd.last; last != nil && cs.nextSeq > last.seq {
			cs.setHWM(last.ts)
		}
	}
	return batch, nil
}

// filteredInvalidate reports whether ev, which the user's pipeline
// filtered out, is the invalidate event; if so the stream ends at it: no
// later event is scanned, and its token is kept for the last batch's
// postBatchResumeToken.
func (cs *changeStream) filteredInvalidate(ev streamEvent) bool {
	if !isInvalidate(ev.doc) {
		return false
	}
	cs.invalidated = true
	cs.invalidateTok, _ = lookupD(ev.doc, "_id").(bson.D)
	cs.invalidateData = ev.data
	return true
}

func isInvalidate(doc bson.D) bool {
	for _, el := range doc {
		if el.Key == "operationType" {
			return el.Value == "invalidate"
		}
	}
	return false
}

// scan reads oplog entries from cs.nextSeq, turning them into events, until
// want events are buffered (want <= 0: all available) or the oplog ends.
func (e *engine) scan(cs *changeStream, want int, rd *oplogReader) error {
	for {
		ent, err := rd.next(cs.nextSeq)
		if err != nil {
			return err
		}
		if ent == nil {
			return nil
		}
		cs.nextSeq = ent.seq + 1
		evs, err := e.eventsFor(cs, ent, rd)
		if err == errLookupLater {
			cs.nextSeq = ent.seq // the next getMore reads it again
			return nil
		}
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if cs.skipThrough != "" {
				if ev.data < cs.skipThrough {
					continue
				}
				if ev.data == cs.skipThrough {
					cs.found = true
					if cs.resumeFragment < 0 && !cs.passResume {
						continue
					}
					cs.dropFragments, cs.resumeFragment = cs.resumeFragment, -1
					cs.skipThrough = ""
				}
				if cs.mustFind && !cs.found {
					return &cmdError{Code: mongoerr.CodeChangeStreamFatalError,
						Msg: "cannot resume stream; the resume token was not found. " + tokenString(bson.D{{Key: "_data", Value: cs.skipThrough}})}
				}
				cs.skipThrough = ""
			}
			if isInvalidate(ev.doc) {
				// The stream ends here whether or not the user's
				// pipeline lets the invalidate event through (MongoDB
				// closes the cursor after it either way).
				cs.invalidated = true
			}
			out := ev.doc
			if cs.pipeline != nil && !cs.matchOnly {
				var keep bool
				out, keep, err = cs.pipeline.ApplyOne(ev.doc, rd.vars)
				if err != nil {
					return err
				}
				if !keep {
					if cs.filteredInvalidate(ev) {
						return nil
					}
					continue
				}
				id, ok := lookupTop(out, "_id")
				if !ok || !mql.Equal(id, lookupD(ev.doc, "_id")) {
					return &cmdError{Code: mongoerr.CodeChangeStreamFatalError,
						Msg: "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed."}
				}
			}
			if cs.matchOnly {
				_, keep, err := cs.pipeline.ApplyOne(ev.doc, rd.vars)
				if err != nil {
					return err
				}
				if !keep {
					if cs.filteredInvalidate(ev) {
						return nil
					}
					continue
				}
			}
			var raw bson.Raw
			shape, cacheable := cs.shape()
			cacheable = cacheable && !isInvalidate(ev.doc)
			if cacheable {
				raw = ent.cachedEvent(shape)
			}
			if raw == nil {
				if cs.pipeline == nil || cs.matchOnly {
					out = withRawImages(out, ent)
				}
				if raw, err = bson.Marshal(out); err != nil {
					return errorf(mongoerr.CodeInternalError, "cannot encode change event: %v", err)
				}
				if cacheable {
					raw = ent.cacheEvent(shape, raw)
				}
			}
			if len(raw) > maxBSONObjectSize && cs.split && !isInvalidate(ev.doc) {
				frags, err := splitEvent(out, entryToken(ent))
				if err != nil {
					return err
				}
				for i, f := range frags {
					if i <= cs.dropFragments {
						continue
					}
					cs.buffered = append(cs.buffered, f)
					cs.bufferedBytes += int64(len(f.raw))
				}
				cs.dropFragments = -1
				continue
			}
			if len(raw) > maxBSONObjectSize {
				// A real server never returns an event over 16 MiB: without
				// $changeStreamSplitLargeEvent it fails the command.
				return errorf(mongoerr.CodeBSONObjectTooLarge, "Executor error during getMore :: caused by :: BSONObj size: %d (0x%X) is invalid. Size must be between 0 and 16793600(16MB) First element: _id: %s",
					len(raw), len(raw), tokenString(bson.D{{Key: "_data", Value: ev.data}}))
			}
			cs.buffered = append(cs.buffered, streamEvent{doc: ev.doc, raw: raw, data: ev.data})
			cs.bufferedBytes += int64(len(raw))
			if isInvalidate(ev.doc) {
				cs.invalidated = true
				return nil
			}
		}
		if want > 0 && len(cs.buffered) >= want || cs.bufferedBytes >= maxBatchBytes {
			return nil
		}
	}
}

// streamGetMore waits up to maxTimeMS (default 1s) for events. It builds
// each batch outside the engine lock (see oplogReader).
func (e *engine) streamGetMore(r *request, cur *cursor, n int) (bson.D, error) {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	cs := cur.stream
	wait := time.Second
	if v, ok := r.arg("maxTimeMS"); ok {
		if ms, ok := asInt64(v); ok && ms >= 0 {
			wait = time.Duration(ms) * time.Millisecond
		}
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		if e.cursors[cur.id] != cur {
			e.mu.Unlock()
			return nil, errorf(mongoerr.CodeCursorNotFound, "cursor id %d not found", cur.id)
		}
		rd := e.newOplogReader(cs.nextSeq, false)
		e.mu.Unlock()
		batch, err := e.streamBatch(cs, n, rd)
		if err != nil {
			e.dropCursor(cur)
			return nil, err
		}
		if len(batch) > 0 || cs.done {
			id := cur.id
			if cs.done {
				e.dropCursor(cur)
				id = 0
			}
			return streamReply(false, id, cur.ns, batch, cs.pbrt), nil
		}
		if rd.closed {
			return nil, errorf(mongoerr.CodeInterruptedAtShutdown, "interrupted at shutdown")
		}
		select {
		case <-rd.wake:
		case <-deadline.C:
			return streamReply(false, cur.id, cur.ns, nil, cs.pbrt), nil
		case <-cs.killed:
			return nil, errorf(mongoerr.CodeCursorNotFound, "cursor id %d not found", cur.id)
		case <-r.ctx.Done():
			return nil, errorf(mongoerr.CodeInterruptedAtShutdown, "interrupted at shutdown")
		}
	}
}

// dropCursor forgets a cursor, unless killCursors already has.
func (e *engine) dropCursor(cur *cursor) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cursors[cur.id] == cur {
		delete(e.cursors, cur.id)
	}
}

// streamReply shapes a change-stream cursor reply. The batch is spliced in
// as already-encoded documents into a buffer of the exact size, so a 16 MiB
// batch is copied once rather than re-encoded.
func streamReply(first bool, id int64, ns string, batch []bson.Raw, pbrt bson.D) bson.D {
	key := "nextBatch"
	if first {
		key = "firstBatch"
	}
	pb, err := bson.Marshal(pbrt)
	if err != nil {
		pb, _ = bson.Marshal(bson.D{})
	}
	size := 64 + len(ns) + len(pb)
	for i, d := range batch {
		size += len(d) + 2 + digits(i)
	}
	dst := make([]byte, 0, size)
	idx, dst := bsoncore.ReserveLength(dst)
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeArray, key)
	aidx, dst := bsoncore.ReserveLength(dst)
	var num []byte
	for i, d := range batch {
		num = strconv.AppendInt(num[:0], int64(i), 10)
		dst = append(dst, byte(bsoncore.TypeEmbeddedDocument))
		dst = append(dst, num...)
		dst = append(dst, 0)
		dst = append(dst, d...)
	}
	dst = append(dst, 0)
	dst = bsoncore.UpdateLength(dst, aidx, int32(len(dst)-int(aidx)))
	dst = bsoncore.AppendDocumentElement(dst, "postBatchResumeToken", pb)
	dst = bsoncore.AppendInt64Element(dst, "id", id)
	dst = bsoncore.AppendStringElement(dst, "ns", ns)
	dst = append(dst, 0)
	dst = bsoncore.UpdateLength(dst, idx, int32(len(dst)-int(idx)))
	return bson.D{{Key: "cursor", Value: bson.Raw(dst)}}
}

// withRawImages returns ev with its fullDocument and fullDocumentBeforeChange
// replaced by the entry's cached encodings when they are the entry's own
// documents, so encoding the event copies them instead of re-encoding them.
func withRawImages(ev bson.D, ent *oplogEntry) bson.D {
	out := ev
	copied := false
	for i, el := range ev {
		var raw bson.Raw
		switch el.Key {
		case "fullDocument":
			if sameDoc(el.Value, ent.doc) {
				raw = ent.rawDoc()
			}
		case "fullDocumentBeforeChange":
			if sameDoc(el.Value, ent.preImage) {
				raw = ent.rawPre()
			}
		}
		if raw == nil {
			continue
		}
		if !copied {
			out = append(bson.D(nil), ev...)
			copied = true
		}
		out[i].Value = raw
	}
	return out
}

func sameDoc(v any, d bson.D) bool {
	x, ok := v.(bson.D)
	return ok && len(x) > 0 && len(d) > 0 && &x[0] == &d[0]
}
