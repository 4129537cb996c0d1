package mongotest

import (
	"context"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Change streams through the mongos, as a real mongos runs them
// (../shared/mongo-sharded.md §1, src/mongo/s/query/exec/
// async_results_merger.cpp):
//
//   - The mongos opens the stream on every shard and on the config server
//     (config.shards, to notice new shards), all from one start time: the
//     resume point, startAtOperationTime, or the cluster time plus one
//     tick. The user's pipeline runs on the shards.
//   - It merges their events in resume-token order (the hex _data
//     compared as strings), and returns an event only once every cursor's
//     postBatchResumeToken has reached it: a shard that has written
//     nothing since holds the merged stream back until its periodic no-op
//     (NoopInterval) moves its token, as on a real cluster.
//   - The first batch is empty: the shards' cursors are opened with
//     batchSize 0, so its postBatchResumeToken is the resume point. Later
//     ones report the last event returned, or, when nothing more is
//     ready, the smallest of the cursors' tokens.
//   - Each shard's getMore waits at most 1 s (min(maxTimeMS, 1 s)); they
//     run in the background, so a client's getMore returns at its own
//     maxTimeMS whatever the shards do.
//   - A config.shards insert (addShard) opens a cursor on the new shard
//     from the insert's time plus one tick; the event itself is swallowed.
//   - A shard's error fails the stream, wrapped "Error on remote shard
//     <host> :: caused by :: ..." with its code and labels.
//   - Resuming from an event's token, the mongos checks that the merged
//     stream has that event (ChangeStreamFatalError 280 otherwise); a shard
//     removed since the resume point fails the open with
//     ChangeStreamHistoryLost (286); showMigrationEvents is refused
//     (31123).

// maxShardAwait caps each shard getMore's wait.
const maxShardAwait = time.Second

// mergedStream is a change stream the mongos merges.
type mergedStream struct {
	rt      *router
	remotes []*remote
	results chan remoteResult
	ctx     context.Context
	cancel  context.CancelFunc

	// The stream's definition, to open it on a shard added later.
	db, coll string
	pipeline bson.A // the user's stages
	opts     bson.D // the $changeStream options, less the start ones
	aggOpts  bson.D // the aggregate's options (collation, comment...)

	// pbrt is the postBatchResumeToken last reported.
	pbrt     bson.D
	pbrtData string
	// resumeData is the event token the stream resumed from, until the
	// merged stream shows it.
	resumeData string
	done       bool
}

// remote is one shard's (or the config server's) cursor of a merged
// stream.
type remote struct {
	sh       *shard // nil for the config server
	srv      *Server
	conn     *conn
	id       int64
	ns       string // the cursor's namespace, for getMore
	buf      []remoteEvent
	pbrt     bson.Raw
	pbrtData string
	inflight bool
	// firstOnly: the cursor has replied to its aggregate only, not yet to
	// a getMore.
	firstOnly bool
}

type remoteEvent struct {
	raw  bson.Raw
	data string
}

type remoteResult struct {
	rem   *remote
	reply bson.D
}

func (rem *remote) host() string {
	if rem.sh == nil {
		return "configRepl/" + rem.srv.Addr()
	}
	return rem.srv.Addr()
}

// kill ends the stream and closes its cursors on the shards. Callers hold
// the cursor's lock (or the only reference to the stream).
func (ms *mergedStream) kill() {
	ms.cancel()
	for _, rem := range ms.remotes {
		if rem.id == 0 {
			continue
		}
		db, coll, _ := splitNS(rem.ns)
		cmd := bson.D{{Key: "killCursors", Value: coll}, {Key: "cursors", Value: bson.A{rem.id}}, {Key: "$db", Value: db}}
		rem.srv.eng.run(context.Background(), &conn{srv: rem.srv}, cmd, nil)
		rem.id = 0
	}
}

// streamSpec reads the $changeStream stage's options.
func streamSpec(pipeline bson.A) (bson.D, error) {
	st, _ := pipeline[0].(bson.D)
	if len(st) != 1 {
		return nil, errorf(mongoerr.CodeFailedToParse, "A pipeline stage specification object must contain exactly one field.")
	}
	opts, ok := st[0].Value.(bson.D)
	if !ok {
		return nil, errorf(mongoerr.CodeFailedToParse, "the $changeStream stage specification must be an object, got %s", typeName(st[0].Value))
	}
	return opts, nil
}

// routerOpenStream opens a change stream through the mongos.
func routerOpenStream(rt *router, r *request) (bson.D, bool, error) {
	if r.txnNumber != nil && r.autocommit != nil {
		return nil, false, errorf(mongoerr.CodeOperationNotSupportedInTransaction, "Operation not permitted in transaction :: caused by :: $changeStream stage is not allowed in a transaction")
	}
	pipeline, _ := lookupD(r.cmd, "pipeline").(bson.A)
	opts, err := streamSpec(pipeline)
	if err != nil {
		return nil, false, err
	}
	ms := &mergedStream{rt: rt, db: r.db, pipeline: pipeline[1:], results: make(chan remoteResult, 1024)}
	if coll, ok := r.cmd[0].Value.(string); ok {
		ms.coll = coll
	}
	var resume bson.D
	var startAt *bson.Timestamp
	var resumeTok *resumetoken.Token
	for _, o := range opts {
		switch o.Key {
		case "showMigrationEvents":
			if mql.Truthy(o.Value) {
				return nil, false, errorf(31123, "Change streams from mongos may not show migration events")
			}
			continue
		case "resumeAfter", "startAfter":
			d, ok := o.Value.(bson.D)
			if !ok {
				return nil, false, errorf(mongoerr.CodeTypeMismatch, "BSON field '$changeStream.%s' is the wrong type '%s', expected type 'object'", o.Key, typeName(o.Value))
			}
			if resume != nil {
				return nil, false, errorf(50865, "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage")
			}
			resume = d
			raw, err := bson.Marshal(d)
			if err != nil {
				return nil, false, errorf(mongoerr.CodeBadValue, "invalid resume token: %v", err)
			}
			tok, err := resumetoken.Parse(raw)
			if err != nil {
				return nil, false, err
			}
			resumeTok = &tok
		case "startAtOperationTime":
			ts, ok := o.Value.(bson.Timestamp)
			if !ok {
				return nil, false, errorf(mongoerr.CodeTypeMismatch, "BSON field '$changeStream.startAtOperationTime' is the wrong type '%s', expected type 'timestamp'", typeName(o.Value))
			}
			startAt = &ts
			continue
		}
		ms.opts = append(ms.opts, o)
	}
	if startAt != nil && resume != nil {
		return nil, false, errorf(40674, "Only one type of resume option is allowed, but multiple were found.")
	}
	ms.opts = withoutFields(ms.opts, "resumeAfter", "startAfter")
	for _, el := range r.cmd[1:] {
		switch el.Key {
		case "pipeline", "cursor", "$db", "lsid", "txnNumber", "autocommit", "startTransaction", "$clusterTime", "$readPreference", "maxTimeMS":
		default:
			ms.aggOpts = append(ms.aggOpts, el)
		}
	}
	// The start: the resume point, startAtOperationTime, or the cluster
	// time plus one tick ("so that all shards start in sync").
	var start bson.Timestamp
	switch {
	case resumeTok != nil:
		start = resumeTok.ClusterTime
		if resumeTok.TokenType == resumetoken.TypeEvent && !resumeTok.FromInvalidate && resumeTok.FragmentNum == nil {
			ms.resumeData, _ = resumeTok.Encode()
		}
	case startAt != nil:
		start = *startAt
	default:
		now := rt.cl.clock.current()
		start = bson.Timestamp{T: now.T, I: now.I + 1}
	}
	rt.mu.Lock()
	shards := rt.liveShards()
	removed := false
	for _, sh := range rt.shards {
		removed = removed || sh.removed && !tsLess(sh.removedAt, start)
	}
	rt.mu.Unlock()
	if removed {
		return nil, false, errorf(mongoerr.CodeChangeStreamHistoryLost, "Change stream events no more available due to removed shard")
	}
	ms.ctx, ms.cancel = context.WithCancel(rt.ctx)
	startOpt := bson.E{Key: "startAtOperationTime", Value: start}
	if resume != nil {
		startOpt = bson.E{Key: "resumeAfter", Value: resume}
		if lookupD(opts, "startAfter") != nil {
			startOpt = bson.E{Key: "startAfter", Value: resume}
		}
	}
	for _, sh := range shards {
		if err := ms.open(r.ctx, sh, startOpt); err != nil {
			ms.kill()
			return nil, false, err
		}
	}
	// The config server's stream of config.shards.
	cfgRem := &remote{srv: rt.cl.config, conn: &conn{srv: rt.cl.config}}
	cfgCmd := bson.D{{Key: "aggregate", Value: "shards"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{
		{Key: "startAtOperationTime", Value: start}, {Key: "allowToRunOnConfigDB", Value: true}}}}}},
		{Key: "cursor", Value: shardCursorOpts()}, {Key: "needsMerge", Value: true}, {Key: "$db", Value: "config"}}
	if err := ms.openRemote(r.ctx, cfgRem, cfgCmd); err != nil {
		ms.kill()
		return nil, false, err
	}
	if data, doc, ok := ms.minEligible(); ok {
		ms.pbrt, ms.pbrtData = doc, data
	}
	ns := r.db + "." + ms.coll
	if ms.coll == "" {
		ns = r.db + ".$cmd.aggregate"
	}
	rc := rt.newCursor(&routerCursor{ns: ns, stream: ms})
	return streamReply(true, rc.id, ns, nil, ms.pbrt), false, nil
}

// shardCursorOpts are the cursor options of a shard's (or the config
// server's) aggregate: batchSize 0, as a mongos establishes them, so that
// no event is buffered before the first getMore and each cursor's first
// postBatchResumeToken is the resume point. The merged stream's first
// postBatchResumeToken, their smallest, then passes no event it has not
// returned: a client resuming from it misses nothing.
func shardCursorOpts() bson.D { return bson.D{{Key: "batchSize", Value: int32(0)}} }

// open opens the stream on a shard from startOpt (startAtOperationTime,
// resumeAfter or startAfter).
func (ms *mergedStream) open(ctx context.Context, sh *shard, startOpt bson.E) error {
	spec := append(append(bson.D(nil), ms.opts...), startOpt)
	pipeline := append(bson.A{bson.D{{Key: "$changeStream", Value: spec}}}, ms.pipeline...)
	var target any = int32(1)
	if ms.coll != "" {
		target = ms.coll
	}
	cmd := bson.D{{Key: "aggregate", Value: target}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: shardCursorOpts()}}
	cmd = append(cmd, ms.aggOpts...)
	cmd = append(cmd, bson.E{Key: "needsMerge", Value: true}, bson.E{Key: "$db", Value: ms.db})
	return ms.openRemote(ctx, &remote{sh: sh, srv: sh.srv, conn: &conn{srv: sh.srv}}, cmd)
}

// openRemote runs a remote's aggregate and adds it to the stream.
func (ms *mergedStream) openRemote(ctx context.Context, rem *remote, cmd bson.D) error {
	reply := rem.srv.eng.run(ctx, rem.conn, cmd, nil)
	if err := ms.apply(rem, reply, true); err != nil {
		return err
	}
	ms.remotes = append(ms.remotes, rem)
	return nil
}

// apply takes in a remote's reply: its events and its token, or its
// error (wrapped as a remote shard's).
func (ms *mergedStream) apply(rem *remote, reply bson.D, first bool) error {
	if ce := replyError(reply); ce != nil {
		return remoteStreamError(rem, ce)
	}
	rem.firstOnly = first
	raw, ok := lookupD(reply, "cursor").(bson.Raw)
	if !ok {
		return errorf(mongoerr.CodeInternalError, "mongotest: shard %s replied to a change stream without a cursor", rem.host())
	}
	rem.id, _ = raw.Lookup("id").Int64OK()
	if ns, ok := raw.Lookup("ns").StringValueOK(); ok {
		rem.ns = ns
	}
	key := "nextBatch"
	if first {
		key = "firstBatch"
	}
	if arr, ok := raw.Lookup(key).ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			doc, ok := v.DocumentOK()
			if !ok {
				continue
			}
			data, _ := doc.Lookup("_id", "_data").StringValueOK()
			rem.buf = append(rem.buf, remoteEvent{raw: doc, data: data})
		}
	}
	if pb, ok := raw.Lookup("postBatchResumeToken").DocumentOK(); ok {
		data, _ := pb.Lookup("_data").StringValueOK()
		if data >= rem.pbrtData {
			rem.pbrt, rem.pbrtData = pb, data
		}
	}
	return nil
}

// remoteStreamError is a shard's error as the mongos returns it: wrapped,
// its code and labels kept.
func remoteStreamError(rem *remote, ce *cmdError) *cmdError {
	out := *ce
	out.Msg = "Error on remote shard " + rem.host() + " :: caused by :: " + ce.Msg
	return &out
}

// minPromised is the smallest postBatchResumeToken of the cursors still
// open or holding events; ok is false while a cursor has none. No event
// above it is returned.
func (ms *mergedStream) minPromised() (string, bson.D, bool) {
	return ms.minToken(false)
}

// minEligible is minPromised without the config server's cursor while it
// has only its first batch: the high-water mark the mongos reports when
// nothing is ready (async_results_merger.cpp getHighWaterMark: the config
// cursor is not eligible on its first batch, SERVER-47810). Its first
// token is the cluster time the stream starts from, a high-water mark
// that sorts before a resumed-after event at that time; counting it would
// make a stream resumed after an event report a token before that event.
func (ms *mergedStream) minEligible() (string, bson.D, bool) {
	return ms.minToken(true)
}

func (ms *mergedStream) minToken(eligible bool) (string, bson.D, bool) {
	var min *remote
	for _, rem := range ms.remotes {
		if rem.id == 0 && len(rem.buf) == 0 {
			continue // closed, nothing left
		}
		if eligible && rem.sh == nil && rem.firstOnly {
			continue
		}
		if rem.pbrt == nil {
			return "", nil, false
		}
		if min == nil || rem.pbrtData < min.pbrtData {
			min = rem
		}
	}
	if min == nil {
		return "", nil, false
	}
	var doc bson.D
	_ = bson.Unmarshal(min.pbrt, &doc)
	return min.pbrtData, doc, true
}

// ready returns the events ready to return, at most n (n < 0: no limit).
func (ms *mergedStream) ready(r *request, n int) ([]bson.Raw, error) {
	var batch []bson.Raw
	var size int64
	for n < 0 || len(batch) < n {
		limit, _, ok := ms.minPromised()
		if !ok {
			break
		}
		var head *remote
		for _, rem := range ms.remotes {
			if len(rem.buf) > 0 && (head == nil || rem.buf[0].data < head.buf[0].data) {
				head = rem
			}
		}
		if head == nil || head.buf[0].data > limit {
			break
		}
		ev := head.buf[0]
		if len(batch) > 0 && size+int64(len(ev.raw)) > maxBatchBytes {
			break
		}
		head.buf = head.buf[1:]
		if head.sh == nil {
			if err := ms.topologyChange(r, ev); err != nil {
				return nil, err
			}
			continue
		}
		if ms.resumeData != "" {
			if ev.data == ms.resumeData {
				ms.resumeData = ""
				continue
			}
			if ev.data > ms.resumeData {
				return nil, &cmdError{Code: mongoerr.CodeChangeStreamFatalError,
					Msg: "cannot resume stream; the resume token was not found. " + tokenString(bson.D{{Key: "_data", Value: ms.resumeData}})}
			}
		}
		batch = append(batch, ev.raw)
		size += int64(len(ev.raw))
		var id bson.D
		_ = bson.Unmarshal(ev.raw.Lookup("_id").Document(), &id)
		ms.pbrt, ms.pbrtData = id, ev.data
		if op, _ := ev.raw.Lookup("operationType").StringValueOK(); op == "invalidate" {
			ms.done = true
			break
		}
	}
	if !ms.done {
		// Nothing more is ready: the token moves up to the smallest of
		// the cursors'.
		if data, doc, ok := ms.minEligible(); ok && data > ms.pbrtData && !ms.hasReady(data) {
			ms.pbrt, ms.pbrtData = doc, data
		}
	}
	return batch, nil
}

// hasReady reports whether an event at or below limit is buffered.
func (ms *mergedStream) hasReady(limit string) bool {
	for _, rem := range ms.remotes {
		if len(rem.buf) > 0 && rem.buf[0].data <= limit {
			return true
		}
	}
	return false
}

// topologyChange handles a config.shards event: an insert (a shard added)
// opens the stream on the new shard from the insert's time plus one tick
// (HandleTopologyChange); every config.shards event is swallowed.
func (ms *mergedStream) topologyChange(r *request, ev remoteEvent) error {
	if op, _ := ev.raw.Lookup("operationType").StringValueOK(); op != "insert" {
		return nil
	}
	id, _ := ev.raw.Lookup("fullDocument", "_id").StringValueOK()
	t, i, _ := ev.raw.Lookup("clusterTime").TimestampOK()
	ms.rt.mu.Lock()
	sh := ms.rt.shardByID(id)
	ms.rt.mu.Unlock()
	if sh == nil {
		return nil
	}
	for _, rem := range ms.remotes {
		if rem.sh == sh {
			return nil
		}
	}
	return ms.open(r.ctx, sh, bson.E{Key: "startAtOperationTime", Value: bson.Timestamp{T: t, I: i + 1}})
}

// schedule sends a getMore to every open cursor that has no events
// buffered and none in flight; they reply on ms.results.
func (ms *mergedStream) schedule(wait time.Duration) {
	ms.remotes = sortRemotes(ms.remotes)
	for _, rem := range ms.remotes {
		if rem.inflight || rem.id == 0 || len(rem.buf) > 0 {
			continue
		}
		rem.inflight = true
		db, coll, _ := splitNS(rem.ns)
		cmd := bson.D{{Key: "getMore", Value: rem.id}, {Key: "collection", Value: coll},
			{Key: "maxTimeMS", Value: int64(min(wait, maxShardAwait) / time.Millisecond)}, {Key: "$db", Value: db}}
		go func(rem *remote) {
			reply := rem.srv.eng.run(ms.ctx, rem.conn, cmd, nil)
			ms.results <- remoteResult{rem: rem, reply: reply}
		}(rem)
	}
}

// sortRemotes keeps the shards first, in the order added, and the config
// server last.
func sortRemotes(rs []*remote) []*remote {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].sh != nil && rs[j].sh == nil })
	return rs
}

// streamGetMore continues a merged change stream: it returns the events
// ready, or waits for the shards up to maxTimeMS (default 1 s).
func (rt *router) streamGetMore(r *request, rc *routerCursor, n int) (bson.D, bool, error) {
	ms := rc.stream
	wait := time.Second
	if v, ok := r.arg("maxTimeMS"); ok {
		if ms, ok := asInt64(v); ok && ms >= 0 {
			wait = time.Duration(ms) * time.Millisecond
		}
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	fail := func(err error) (bson.D, bool, error) {
		rt.dropCursor(rc)
		ms.kill()
		return nil, false, err
	}
	for {
		// Take in what the shards have replied.
	drain:
		for {
			select {
			case res := <-ms.results:
				res.rem.inflight = false
				if err := ms.apply(res.rem, res.reply, false); err != nil {
					return fail(err)
				}
			default:
				break drain
			}
		}
		batch, err := ms.ready(r, n)
		if err != nil {
			return fail(err)
		}
		if len(batch) > 0 || ms.done {
			id := rc.id
			if ms.done {
				rt.dropCursor(rc)
				ms.kill()
				id = 0
			}
			return streamReply(false, id, rc.ns, batch, ms.pbrt), false, nil
		}
		ms.schedule(wait)
		select {
		case res := <-ms.results:
			res.rem.inflight = false
			if err := ms.apply(res.rem, res.reply, false); err != nil {
				return fail(err)
			}
		case <-deadline.C:
			return streamReply(false, rc.id, rc.ns, nil, ms.pbrt), false, nil
		case <-ms.ctx.Done():
			return nil, false, errorf(mongoerr.CodeCursorNotFound, "cursor id %d not found", rc.id)
		case <-r.ctx.Done():
			return nil, false, errorf(mongoerr.CodeInterruptedAtShutdown, "interrupted at shutdown")
		}
	}
}
