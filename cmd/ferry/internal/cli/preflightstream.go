package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/mongoerr"
)

// streamFindings are one stream's: its change stream as ferry opens it,
// the features it relies on, its source user's privileges, its oplog
// window and its source client's pool.
func (p *preflight) streamFindings(ctx context.Context, st *config.Stream) []finding {
	subject := "stream " + st.Name
	info := p.servers[st.Source.URI]
	client := p.sources[st.Source.URI]
	if info == nil || info.err != nil || client == nil {
		return []finding{{Subject: subject, Check: "source", Result: checkFail,
			Detail: "not checked: its source cannot be reached (see its server's topology row)"}}
	}
	s := &streamCheck{p: p, st: st, subject: subject, client: client, info: info}
	opened := s.changeStream(ctx)
	out := []finding{opened.finding}
	if info.standalone() {
		// Nothing opens there: one row says so instead of each feature's.
		out = append(out, finding{Subject: subject, Check: "change-stream features", Result: checkWarn,
			Detail: "not tried ($toHashedIndexKey, $changeStreamSplitLargeEvent, the oplog window): a standalone server has no change streams (see its topology row)"})
	} else {
		out = append(out, s.hashedIndexKey(ctx), s.splitEvents(ctx))
	}
	out = append(out, s.images(ctx))
	out = append(out, s.privileges(ctx, opened.err))
	if p.opts.oplog && !info.standalone() {
		out = append(out, s.oplogWindow(ctx))
		if info.mongos && p.opts.shards {
			out = append(out, s.shardOplogFindings(ctx)...)
		}
	}
	need := p.cfg.SourcePoolNeed(st.Source.URI)
	unit := "a change stream per partition of every stream reading this URI"
	if p.cfg.State.Bolt != nil {
		unit = "a change stream per stream reading this URI"
	}
	out = append(out, poolFinding(subject, st.Source.URI, need, fmt.Sprintf("%d = %s, %d for ferry's other reads", need, unit, config.PoolHeadroom)))
	return out
}

// streamCheck is one stream being checked.
type streamCheck struct {
	p       *preflight
	st      *config.Stream
	subject string
	client  *mongo.Client
	info    *serverInfo
}

func (s *streamCheck) path() string {
	for i := range s.p.cfg.Streams {
		if &s.p.cfg.Streams[i] == s.st {
			return fmt.Sprintf("streams[%d]", i)
		}
	}
	return "stream " + s.st.Name
}

func (s *streamCheck) scope() string {
	switch sc := s.st.Source.Scope; {
	case sc.Cluster:
		return "the whole cluster"
	case sc.Collection == "":
		return "database " + sc.Database
	default:
		return sc.Database + "." + sc.Collection
	}
}

// scopeResource is the resource a change stream of the scope needs its
// privileges on.
func (s *streamCheck) scopeResource() resourceRef {
	sc := s.st.Source.Scope
	if sc.Cluster {
		return resourceRef{}
	}
	return resourceRef{db: sc.Database, coll: sc.Collection}
}

// openResult is the change-stream row and the open's error.
type openResult struct {
	finding
	err error
}

// changeStream opens the stream as ferry run does (scope, pipeline,
// options, partition 0's filter, the split stage where the server's
// version has it) at the current cluster time, and closes it.
func (s *streamCheck) changeStream(ctx context.Context) openResult {
	ctx, cancel := context.WithTimeout(ctx, s.p.opts.timeout)
	defer cancel()
	f := finding{Subject: s.subject, Check: "change stream"}
	cons, err := toolConsumer(s.st, s.client, s.p.cps)
	if err == nil {
		var cs *mongo.ChangeStream
		if cs, err = cons.Watch(ctx, s.info.opTime); err == nil {
			err = cs.Close(ctx)
		}
	}
	var what []string
	if n := s.st.Group.Partitions; n > 1 {
		what = append(what, fmt.Sprintf("partition 1 of %d's filter", n))
	}
	if s.st.Source.SplitLargeEvents && s.info.hasSplitStage() {
		what = append(what, "$changeStreamSplitLargeEvent")
	}
	desc := "the stream's pipeline and options"
	if len(what) > 0 {
		desc += ", " + strings.Join(what, ", ")
	}
	if err != nil {
		f.Result, f.Detail = checkFail, fmt.Sprintf("opening it on %s with %s: %v", s.scope(), desc, err)
		f.Fix = s.fixFor(err)
		return openResult{f, err}
	}
	f.Result, f.Detail = checkPass, fmt.Sprintf("opened and closed on %s with %s", s.scope(), desc)
	return openResult{f, nil}
}

// fixFor says what to do about an error opening the stream.
func (s *streamCheck) fixFor(err error) string {
	msg := err.Error()
	switch code := serverCode(err); {
	case code == mongoerr.CodeUnauthorized && strings.Contains(msg, "requires authentication"):
		return "put the user's name and password in " + s.path() + ".source.uri (mongodb://user:password@host/...)"
	case code == mongoerr.CodeUnauthorized:
		return "grant the source user changeStream and find on " + s.scopeResource().String() + " (the read role there; see the privileges row)"
	case code == mongoerr.CodeAuthenticationFailed:
		return "check the user name and password in " + s.path() + ".source.uri"
	case strings.Contains(msg, "$changeStreamSplitLargeEvent"):
		return fmt.Sprintf("set %s.source.split_large_events: false (this deployment refuses the stage; an event over 16 MB then follows %s.oversize: %s; "+
			"the setting is part of the stream's identity)", s.path(), s.path(), s.oversize())
	case strings.Contains(msg, "$toHashedIndexKey"):
		return fmt.Sprintf("set %s.group.partitions: 1 (one active member, the others on standby), or upgrade the server to 5.0 or later", s.path())
	case code == 40575 || strings.Contains(msg, "fullDocumentBeforeChange") || strings.Contains(msg, "showExpandedEvents"):
		return "pre- and post-images and showExpandedEvents need MongoDB 6.0+: upgrade, or set source.full_document to default or updateLookup, full_document_before_change to off, show_expanded_events to false"
	case code == 40573:
		return "run the server as a replica set, even of one member (mongod --replSet rs0, then rs.initiate() once)"
	case code == mongoerr.CodeNamespaceNotFound || code == mongoerr.CodeInvalidNamespace:
		return "check " + s.path() + ".source.scope"
	}
	return "see the error; `ferry run` would fail the stream with it"
}

func (s *streamCheck) oversize() string {
	if s.st.Oversize == "" {
		return string(ferry.OversizeFail)
	}
	return string(s.st.Oversize)
}

// watchScope opens a change stream on the stream's scope with pipeline at
// the current cluster time, and closes it.
func (s *streamCheck) watchScope(ctx context.Context, pipeline mongo.Pipeline) error {
	ctx, cancel := context.WithTimeout(ctx, s.p.opts.timeout)
	defer cancel()
	opts := options.ChangeStream().SetStartAtOperationTime(&s.info.opTime).SetBatchSize(1)
	var cs *mongo.ChangeStream
	var err error
	switch sc := s.st.Source.Scope; {
	case sc.Cluster:
		cs, err = s.client.Watch(ctx, pipeline, opts)
	case sc.Collection == "":
		cs, err = s.client.Database(sc.Database).Watch(ctx, pipeline, opts)
	default:
		cs, err = s.client.Database(sc.Database).Collection(sc.Collection).Watch(ctx, pipeline, opts)
	}
	if err != nil {
		return err
	}
	return cs.Close(ctx)
}

// hashedIndexKey tries the partition filter ($toHashedIndexKey in a
// change stream's $match), which a group of more than one partition
// needs.
func (s *streamCheck) hashedIndexKey(ctx context.Context) finding {
	f := finding{Subject: s.subject, Check: "$toHashedIndexKey", Result: checkPass}
	n := s.st.Group.Partitions
	if n <= 1 {
		f.Detail = "not needed: one partition"
		return f
	}
	scheme := s.st.Group.Partitioning
	if scheme == "" {
		scheme = ferry.HashRange
	}
	match := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$expr", Value: ferry.PartitionMatch(scheme, "$documentKey._id", 0, n)}}}}}
	if err := s.watchScope(ctx, match); err != nil {
		f.Result = checkFail
		f.Detail = fmt.Sprintf("a change stream with a partition's filter ({$match: {$expr: ... $toHashedIndexKey ...}}) fails on %s: %v", s.scope(), err)
		f.Fix = s.fixFor(err)
		if serverCode(err) != mongoerr.CodeUnauthorized {
			f.Fix = fmt.Sprintf("set %s.group.partitions: 1 (one active member, the others on standby), or upgrade the server to 5.0 or later", s.path())
		}
		return f
	}
	f.Detail = fmt.Sprintf("a change stream with partition 1 of %d's filter opens", n)
	return f
}

// splitEvents tries $changeStreamSplitLargeEvent where the stream splits
// large events (source.split_large_events, on by default).
func (s *streamCheck) splitEvents(ctx context.Context) finding {
	f := finding{Subject: s.subject, Check: "$changeStreamSplitLargeEvent", Result: checkPass}
	over := fmt.Sprintf("%s.oversize: %s", s.path(), s.oversize())
	if !s.st.Source.SplitLargeEvents {
		f.Detail = "not used (source.split_large_events: false): an event over 16 MB follows " + over
		return f
	}
	err := s.watchScope(ctx, mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}})
	switch {
	case err == nil && s.info.hasSplitStage():
		f.Detail = "the server splits events over 16 MB; ferry reassembles them"
	case err == nil:
		f.Detail = fmt.Sprintf("the stage opens, but ferry uses it from 7.0 and 6.0.9 (MongoDB %s): an event over 16 MB follows %s", s.info.version, over)
	case isUnauthorized(err):
		f.Result, f.Detail, f.Fix = checkWarn, "could not try it: "+err.Error(), s.fixFor(err)
	case s.info.hasSplitStage():
		// ferry adds the stage from this version on: the stream will not open.
		f.Result = checkFail
		f.Detail = fmt.Sprintf("MongoDB %s refuses it (%v), and ferry adds it to the stream on this version: the stream will not open", s.info.version, err)
		f.Fix = s.fixFor(err)
	case s.st.Oversize == "" || s.st.Oversize == ferry.OversizeFail:
		f.Result = checkWarn
		f.Detail = fmt.Sprintf("MongoDB %s lacks it (%v): an event over 16 MB stops the stream (%s)", s.info.version, err, over)
		f.Fix = fmt.Sprintf("upgrade to 7.0 or 6.0.9+, or set %s.oversize: dead-letter or drop-images", s.path())
	default:
		f.Detail = fmt.Sprintf("MongoDB %s lacks it: an event over 16 MB follows %s", s.info.version, over)
	}
	return f
}

// imagesNeeded says what of pre- and post-images the stream's options
// need: "" (none), "whenAvailable" or "required", and which option.
func (s *streamCheck) imagesNeeded() (level, option string) {
	src := s.st.Source
	for _, o := range []struct{ name, v string }{
		{"full_document", src.FullDocument}, {"full_document_before_change", src.FullDocumentBeforeChange}} {
		switch o.v {
		case "required":
			return "required", o.name + ": required"
		case "whenAvailable":
			level, option = "whenAvailable", o.name+": whenAvailable"
		}
	}
	return level, option
}

// images checks that the collections in scope record pre- and post-images
// (listCollections options.changeStreamPreAndPostImages.enabled) when the
// stream's options need them: fail for required, warn for whenAvailable
// (the image is then null).
func (s *streamCheck) images(ctx context.Context) finding {
	f := finding{Subject: s.subject, Check: "pre/post images", Result: checkPass}
	level, option := s.imagesNeeded()
	if level == "" {
		f.Detail = "not needed by the stream's options"
		return f
	}
	bad := checkWarn
	consequence := "their events carry null images"
	if level == "required" {
		bad, consequence = checkFail, "the stream fails at their first update, replace or delete"
	}
	if !s.info.atLeast(6, 0) {
		f.Result = bad
		f.Detail = fmt.Sprintf("%s, but MongoDB %s has no pre- and post-images (6.0+)", option, s.info.version)
		f.Fix = "upgrade to 6.0 or later, or set " + s.path() + ".source.full_document to updateLookup and full_document_before_change to off"
		return f
	}
	ctx, cancel := context.WithTimeout(ctx, s.p.opts.timeout)
	defer cancel()
	colls, err := s.collectionsInScope(ctx)
	if err != nil {
		f.Result, f.Detail = checkWarn, fmt.Sprintf("%s, and the collections could not be listed: %v", option, err)
		f.Fix = "grant the source user listCollections on the scope (the read role), or check each collection's changeStreamPreAndPostImages by hand"
		return f
	}
	var off []string
	for _, c := range colls {
		if !c.images {
			off = append(off, c.ns)
		}
	}
	if len(off) == 0 {
		if len(colls) == 0 {
			f.Detail = fmt.Sprintf("%s; no collection in %s yet: create each with changeStreamPreAndPostImages: {enabled: true}", option, s.scope())
		} else {
			f.Detail = fmt.Sprintf("%s; enabled on the %s in scope", option, plural(len(colls), "collection"))
		}
		return f
	}
	shown := off
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(off)-10))
	}
	f.Result = bad
	f.Detail = fmt.Sprintf("%s, but changeStreamPreAndPostImages is off on %s (%s): %s", option, plural(len(off), "collection"), strings.Join(shown, ", "), consequence)
	first := off[0]
	db, coll, _ := strings.Cut(first, ".")
	f.Fix = fmt.Sprintf("enable it on each: db.getSiblingDB(%q).runCommand({collMod: %q, changeStreamPreAndPostImages: {enabled: true}}) (images are recorded from then on)", db, coll)
	return f
}

type scopedCollection struct {
	ns     string
	images bool
}

// collectionsInScope lists the collections of the stream's scope (the
// collection, every collection of the database, or of every database but
// admin, local and config) with whether they record images. A scoped
// collection that does not exist yet is listed as not recording them.
func (s *streamCheck) collectionsInScope(ctx context.Context) ([]scopedCollection, error) {
	sc := s.st.Source.Scope
	var dbs []string
	switch {
	case sc.Cluster:
		names, err := s.client.ListDatabaseNames(ctx, bson.D{})
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if n != "admin" && n != "local" && n != "config" {
				dbs = append(dbs, n)
			}
		}
	default:
		dbs = []string{sc.Database}
	}
	var out []scopedCollection
	for _, db := range dbs {
		filter := bson.D{{Key: "type", Value: "collection"}}
		if sc.Collection != "" {
			filter = append(filter, bson.E{Key: "name", Value: sc.Collection})
		}
		cur, err := s.client.Database(db).ListCollections(ctx, filter)
		if err != nil {
			return nil, err
		}
		var specs []struct {
			Name    string   `bson:"name"`
			Options bson.Raw `bson:"options"`
		}
		if err := cur.All(ctx, &specs); err != nil {
			return nil, err
		}
		for _, c := range specs {
			if strings.HasPrefix(c.Name, "system.") {
				continue
			}
			on, _ := c.Options.Lookup("changeStreamPreAndPostImages", "enabled").BooleanOK()
			out = append(out, scopedCollection{ns: db + "." + c.Name, images: on})
		}
	}
	if sc.Collection != "" && len(out) == 0 {
		out = append(out, scopedCollection{ns: sc.Database + "." + sc.Collection})
	}
	return out, nil
}

// privileges checks the source user's: changeStream and find on the
// scope (the stream, and its backfills, snapshots and verify reads).
func (s *streamCheck) privileges(ctx context.Context, opened error) finding {
	ctx, cancel := context.WithTimeout(ctx, s.p.opts.timeout)
	defer cancel()
	needs := []privilegeNeed{{res: s.scopeResource(), actions: []string{"changeStream", "find"},
		why: "the change stream, and backfills, snapshots and verify"}}
	if level, _ := s.imagesNeeded(); level != "" {
		needs = append(needs, privilegeNeed{res: resourceRef{db: s.scopeResource().db}, actions: []string{"listCollections"}, optional: true,
			why: "for ferry check to read whether pre- and post-images are on"})
	}
	return privilegeFinding(ctx, s.subject, "source privileges", s.path()+".source.uri", s.client, needs, opened)
}

// oplogWindow measures how far back the stream can start
// (Consumer.OplogStart, by the server's clock) against the planned
// downtime: fail when it is shorter, warn when it is less than twice as
// long.
func (s *streamCheck) oplogWindow(ctx context.Context) finding {
	f := finding{Subject: s.subject, Check: "oplog window"}
	start, err := s.oplogStart(ctx, s.client)
	if err != nil {
		f.Result, f.Detail = checkWarn, "could not measure it: "+err.Error()
		return f
	}
	if s.info.mongos {
		// Through mongos a change stream loses its position when any
		// shard's oplog no longer holds it.
		return s.judgeWindow(f, start, " through mongos (the shortest of the shards' oplogs)", "on each shard's members: ")
	}
	return s.judgeWindow(f, start, "", "")
}

// oplogStart is the oldest cluster time a change stream of the stream can
// start at on client (Consumer.OplogStart).
func (s *streamCheck) oplogStart(ctx context.Context, client *mongo.Client) (bson.Timestamp, error) {
	cons, err := toolConsumer(s.st, client, s.p.cps)
	if err != nil {
		return bson.Timestamp{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*s.p.opts.timeout)
	defer cancel()
	return cons.OplogStart(ctx, bson.Timestamp{})
}

// judgeWindow fills f with the window from start to the server's now,
// against the planned downtime; where says whose oplog it is, fixWhere
// where to make it hold more.
func (s *streamCheck) judgeWindow(f finding, start bson.Timestamp, where, fixWhere string) finding {
	now := s.info.localTime
	if now.IsZero() {
		now = time.Unix(int64(s.info.opTime.T), 0)
	}
	window := max(now.Sub(time.Unix(int64(start.T), 0)), 0).Round(time.Second)
	f.Detail = fmt.Sprintf("the oplog holds %v of history%s (since %s, by the server's clock)", window, where, time.Unix(int64(start.T), 0).UTC().Format(time.RFC3339))
	d := s.p.opts.downtime
	fix := fixWhere + "make the oplog hold more: replSetResizeOplog with a larger size or minRetentionHours (Atlas: the cluster's oplog settings); " +
		"an oplog not yet full holds more as it fills: check again then"
	switch {
	case d == 0:
		f.Result = checkPass
		f.Detail += "; pass -downtime to compare it with a planned stop"
	case window < d:
		f.Result = checkFail
		f.Detail += fmt.Sprintf(", less than the planned downtime %v: a stop that long loses the stream's position (on_history_lost: %s)", d, s.st.OnHistoryLost)
		f.Fix = fix
	case window < 2*d:
		f.Result = checkWarn
		f.Detail += fmt.Sprintf(", less than twice the planned downtime %v", d)
		f.Fix = fix
	default:
		f.Result = checkPass
		f.Detail += fmt.Sprintf(", over twice the planned downtime %v", d)
	}
	return f
}
