package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/resumetoken"
)

// The snapshot bench's names: the source collection, the state store's
// database and the projection's, each on its emulator.
const (
	snapDB     = "ferrybench"
	snapColl   = "docs"
	snapState  = "ferrybench_state"
	snapProjDB = "ferrybench_proj"
	snapStream = "snapbench"
	// snapOplogBytes caps both emulators' oplogs: the load (and the
	// projection's writes) roll through it; the stream needs only its
	// own window.
	snapOplogBytes = 256 << 20
)

// envSpec is what one scenario's setup holds.
type envSpec struct {
	name         string  // the scenario(s), for messages
	docs         int     // the collection's documents
	oplogEntries int     // the source's oplog cap in entries (0: none)
	sink         string  // "mongodb" (the projection) or "none" (a no-op handler)
	hashed       bool    // an {_id: "hashed"} index from the start
	rate         float64 // SnapshotMaxRate per partition
}

// snapEnv is one scenario's setup: a source emulator with the collection,
// a target emulator with the state store and the projection, and the
// members, which run the stream from now (start_at: now) until a snapshot
// is requested.
type snapEnv struct {
	o         *snapSettings
	spec      envSpec
	progress  func(format string, args ...any)
	src, tgt  *child
	srcClient *mongo.Client
	tgtClient *mongo.Client
	coll      *mongo.Collection // the source collection
	proj      *mongo.Collection // the projection
	store     *mongostore.Store
	members   []*child // nil where killed
	all       []*child // every member started, killed or not
	profile   string   // a directory: snapshot profiles the processes into it
	rows      *rowCounter
	dir       string
	// peaks: peak RSS of each process, filled by close (members killed
	// earlier keep theirs).
	memberRSS []int64
	srcRSS    int64
	tgtRSS    int64
}

func startSnapEmulator(entries int) (*child, error) {
	env := []string{oplogBytesEnv + "=" + strconv.Itoa(snapOplogBytes)}
	if entries > 0 {
		env = append(env, oplogEntriesEnv+"="+strconv.Itoa(entries))
	}
	return startChild("emulator", env)
}

// newSnapEnv starts the emulators, loads the collection and starts the
// members, and returns once every member runs its share of the
// partitions.
func newSnapEnv(ctx context.Context, o *snapSettings, spec envSpec, progress func(string, ...any)) (e *snapEnv, err error) {
	e = &snapEnv{o: o, spec: spec, progress: progress, rows: &rowCounter{}, memberRSS: make([]int64, o.members)}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
			e = nil
		}
	}()
	if e.src, err = startSnapEmulator(spec.oplogEntries); err != nil {
		return e, err
	}
	if e.tgt, err = startSnapEmulator(0); err != nil {
		return e, err
	}
	if e.srcClient, err = mongo.Connect(options.Client().ApplyURI(e.src.ready.URI)); err != nil {
		return e, err
	}
	if e.tgtClient, err = mongo.Connect(options.Client().ApplyURI(e.tgt.ready.URI)); err != nil {
		return e, err
	}
	e.coll = e.srcClient.Database(snapDB).Collection(snapColl)
	e.proj = e.tgtClient.Database(snapProjDB).Collection(snapColl)
	if e.store, err = mongostore.New(e.tgtClient.Database(snapState)); err != nil {
		return e, err
	}
	// MongoDB keeps minSnapshotHistoryWindowInSeconds (300 s) of history
	// for snapshot reads at all times; the emulator keeps it from its
	// first snapshot read on. One read before the load gives the stream's
	// positions (the first one is just before the load's last write) the
	// history a real server has.
	warm := bson.D{{Key: "find", Value: snapColl}, {Key: "limit", Value: int64(1)},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}}
	if err := e.srcClient.Database(snapDB).RunCommand(ctx, warm).Err(); err != nil {
		return e, fmt.Errorf("a snapshot read on the source: %w", err)
	}
	start := time.Now()
	if err := loadDocs(ctx, e.coll, 0, spec.docs, o.docSize); err != nil {
		return e, err
	}
	progress("%s: loaded %d documents of %d bytes in %s", spec.name, spec.docs, o.docSize, time.Since(start).Round(time.Millisecond))
	if spec.hashed {
		if err := e.createHashedIndex(ctx); err != nil {
			return e, err
		}
	}
	if e.dir, err = os.MkdirTemp("", "ferry-bench-snapshot-"); err != nil {
		return e, err
	}
	path := filepath.Join(e.dir, "ferry.yaml")
	if err := os.WriteFile(path, []byte(e.yaml()), 0o600); err != nil {
		return e, err
	}
	env := []string{memberConfigEnv + "=" + path, memberSinkEnv + "=" + spec.sink,
		memberChunkEnv + "=" + strconv.Itoa(o.chunk), memberRateEnv + "=" + strconv.FormatFloat(spec.rate, 'g', -1, 64),
		memberPollEnv + "=" + o.poll.String(), memberLogEnv + "=" + o.logLevel}
	for range o.members {
		m, err := startChildWith(&child{role: "member", rows: e.rows.add, stopWait: 2 * time.Minute}, env)
		if err != nil {
			return e, err
		}
		e.members, e.all = append(e.members, m), append(e.all, m)
	}
	start = time.Now()
	if err := e.awaitShares(ctx); err != nil {
		return e, err
	}
	progress("%s: %d members run %d partitions (%s to share them)", spec.name, o.members, o.partitions, time.Since(start).Round(time.Millisecond))
	return e, nil
}

// yaml is the members' configuration file: `ferry run`'s, the stream from
// now, the projection in the target's cluster beside the state store.
func (e *snapEnv) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by ferry bench snapshot (%s).\n", e.spec.name)
	fmt.Fprintf(&b, "log: {level: %s}\n", e.o.logLevel)
	fmt.Fprintf(&b, "state: {uri: %s, database: %s}\n", quote(e.tgt.ready.URI), snapState)
	fmt.Fprintf(&b, "streams:\n  - name: %s\n    source:\n      uri: %s\n", snapStream, quote(e.src.ready.URI))
	fmt.Fprintf(&b, "      scope: {collection: %s}\n", quote(snapDB+"."+snapColl))
	fmt.Fprintf(&b, "      full_document: updateLookup\n      start_at: now\n")
	fmt.Fprintf(&b, "    group: {partitions: %d, lease_ttl: %s}\n", e.o.partitions, e.o.leaseTTL)
	fmt.Fprintf(&b, "    delivery: {mode: at-least-once}\n")
	fmt.Fprintf(&b, "    sink: {mongodb: {database: %s, collection: %s}}\n", snapProjDB, snapColl)
	return b.String()
}

func (e *snapEnv) createHashedIndex(ctx context.Context) error {
	_, err := e.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "_id", Value: "hashed"}}})
	if err != nil {
		return fmt.Errorf("create the {_id: hashed} index: %w", err)
	}
	return nil
}

// loadDocs inserts documents from to to-1 into coll, 1,000 per insertMany.
func loadDocs(ctx context.Context, coll *mongo.Collection, from, to, size int) error {
	for i := from; i < to; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < i+1000 && j < to; j++ {
			docs = append(docs, newDoc(int64(j), size))
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			return fmt.Errorf("load the collection: %w", err)
		}
	}
	return nil
}

// newDoc is document id: {_id, g: id mod 10 (what the filter scenario
// selects on), v: 0, payload}, about size bytes of BSON.
func newDoc(id int64, size int) bson.D {
	// 46 bytes without the payload's characters: the document's length and
	// end, _id (int64), g and v (int32), payload's name and length.
	return bson.D{{Key: "_id", Value: id}, {Key: "g", Value: int32(id % 10)}, {Key: "v", Value: int32(0)},
		{Key: "payload", Value: strings.Repeat("p", max(size-46, 1))}}
}

// memberStatuses asks every live member for its status.
func (e *snapEnv) memberStatuses() ([]*memberStatus, error) {
	out := make([]*memberStatus, len(e.members))
	for i, m := range e.members {
		if m == nil {
			continue
		}
		r, err := m.call("status")
		if err != nil {
			return nil, err
		}
		if r.Member == nil {
			return nil, fmt.Errorf("member %d answered status without it", i+1)
		}
		out[i] = r.Member
	}
	return out, nil
}

// failedMember returns an error naming the first live member whose stream
// failed, and why; nil when none did.
func (e *snapEnv) failedMember() error {
	sts, err := e.memberStatuses()
	if err != nil {
		return err
	}
	for i, st := range sts {
		if st != nil && st.State == string(group.Failed) {
			return fmt.Errorf("member %d's stream failed: %s", i+1, st.Failure)
		}
	}
	return nil
}

// awaitShares waits until every member runs and owns its share of the
// partitions.
func (e *snapEnv) awaitShares(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		sts, err := e.memberStatuses()
		if err != nil {
			return err
		}
		ok := true
		var desc []string
		for i, st := range sts {
			desc = append(desc, fmt.Sprintf("member %d %s owns %v", i+1, st.State, st.Owned))
			if st.State != "running" || len(st.Owned) < e.o.partitions/e.o.members {
				ok = false
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the members did not share the partitions within 2 minutes: %s", strings.Join(desc, "; "))
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// pause waits d, or until ctx ends. It paces polls of state that has no
// notification to wait on (the store, the members' status).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// request asks for a snapshot of the stream, as `ferry snapshot` does
// (the store's SnapshotRequests).
func (e *snapEnv) request(ctx context.Context, filter bson.Raw) (checkpoint.SnapshotRequest, error) {
	return e.store.RequestSnapshot(ctx, checkpoint.SnapshotRequest{Stream: snapStream, Filter: filter, Note: "ferry bench snapshot"})
}

// snapshotProgress is each partition's progress of request id, as the
// checkpoints record it (a zero value: not begun there).
func (e *snapEnv) snapshotProgress(ctx context.Context, id string) ([]ferry.SnapshotProgress, []checkpoint.Checkpoint, error) {
	cps, err := e.store.List(ctx, snapStream)
	if err != nil {
		return nil, nil, err
	}
	out := make([]ferry.SnapshotProgress, e.o.partitions)
	for _, cp := range cps {
		p, ok, err := ferry.SnapshotOf(cp)
		if err != nil {
			return nil, nil, err
		}
		if ok && p.Request == id && cp.Partition >= 0 && cp.Partition < len(out) {
			out[cp.Partition] = p
		}
	}
	return out, cps, nil
}

// awaitSnapshot waits until every partition finished request id; each
// poll's progress goes to every (which may end the wait with an error).
// A member whose stream failed (lost history, say) takes none of its
// partitions while failed, so the snapshot cannot finish: the wait ends at
// once with the member's failure rather than at the scenario's timeout.
func (e *snapEnv) awaitSnapshot(ctx context.Context, id string, every func([]ferry.SnapshotProgress) error) ([]ferry.SnapshotProgress, error) {
	for poll := 0; ; poll++ {
		ps, _, err := e.snapshotProgress(ctx, id)
		if err != nil {
			return nil, err
		}
		if poll%25 == 0 { // every half second
			if err := e.failedMember(); err != nil {
				return nil, fmt.Errorf("the snapshot cannot finish (%s): %w", progressText(ps), err)
			}
		}
		if every != nil {
			if err := every(ps); err != nil {
				return nil, err
			}
		}
		finished := 0
		for p, x := range ps {
			if x.Cancelled {
				return nil, fmt.Errorf("partition %d: the snapshot was cancelled", p)
			}
			if x.ID != "" && !x.Running() {
				finished++
			}
		}
		if finished == len(ps) {
			return ps, nil
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return nil, fmt.Errorf("waiting for the snapshot (done %d of %d partitions: %s): %w", finished, len(ps), progressText(ps), err)
		}
	}
}

func progressText(ps []ferry.SnapshotProgress) string {
	var s []string
	for p, x := range ps {
		s = append(s, fmt.Sprintf("p%d %d/%d", p, x.Done, x.Total))
	}
	return strings.Join(s, ", ")
}

// span is the snapshot's documents and time: from the first partition's
// start to the last one's end, as the records say.
func span(ps []ferry.SnapshotProgress) (docs int64, took time.Duration) {
	var first, last time.Time
	for _, x := range ps {
		docs += x.Done
		if first.IsZero() || x.Started.Before(first) {
			first = x.Started
		}
		if x.Finished.After(last) {
			last = x.Finished
		}
	}
	return docs, last.Sub(first)
}

// sync returns once every live member's rows written so far are counted.
func (e *snapEnv) sync() error {
	for _, m := range e.members {
		if m == nil {
			continue
		}
		if _, err := m.call("sync"); err != nil {
			return err
		}
	}
	return nil
}

// serverCounts reads the source's serverStatus counters: documents
// returned, documents examined.
func (e *snapEnv) serverCounts(ctx context.Context) (returned, examined int64, err error) {
	var st struct {
		Metrics struct {
			Document      struct{ Returned int64 } `bson:"document"`
			QueryExecutor struct {
				ScannedObjects int64 `bson:"scannedObjects"`
			} `bson:"queryExecutor"`
		} `bson:"metrics"`
	}
	err = e.srcClient.Database("admin").RunCommand(ctx, bson.D{{Key: "serverStatus", Value: 1}}).Decode(&st)
	return st.Metrics.Document.Returned, st.Metrics.QueryExecutor.ScannedObjects, err
}

// marker writes a document outside the stream's scope and returns its
// cluster time: every write before it is before that time.
func (e *snapEnv) marker(ctx context.Context) (bson.Timestamp, error) {
	sess, err := e.srcClient.StartSession()
	if err != nil {
		return bson.Timestamp{}, err
	}
	defer sess.EndSession(ctx)
	if _, err := e.srcClient.Database(snapDB).Collection("marker").InsertOne(mongo.NewSessionContext(ctx, sess), bson.D{}); err != nil {
		return bson.Timestamp{}, fmt.Errorf("write the marker: %w", err)
	}
	if sess.OperationTime() == nil {
		return bson.Timestamp{}, errors.New("the marker's write has no operationTime")
	}
	return *sess.OperationTime(), nil
}

// converge waits until every partition's checkpoint is at or past at:
// every change before it is applied.
func (e *snapEnv) converge(ctx context.Context, at bson.Timestamp, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		cps, err := e.store.List(ctx, snapStream)
		if err != nil {
			return err
		}
		behind := []string{}
		seen := 0
		for _, cp := range cps {
			if cp.Partition < 0 || cp.Partition >= e.o.partitions {
				continue
			}
			seen++
			if cp.State != checkpoint.StateRunning {
				return fmt.Errorf("partition %d is %s: %s", cp.Partition, cp.State, cp.Note)
			}
			tok, err := resumetoken.Parse(cp.Token)
			if err != nil || tok.ClusterTime.Compare(at) < 0 {
				behind = append(behind, strconv.Itoa(cp.Partition))
			}
		}
		if seen == e.o.partitions && len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the stream did not catch up with the last write within %s (partitions behind: %s; %d checkpoints)",
				within, strings.Join(behind, ", "), seen)
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// leaseLosses counts the lost leases and memberships the members logged.
func (e *snapEnv) leaseLosses() int {
	n := 0
	for _, m := range e.all {
		log := m.stderr.String()
		n += strings.Count(log, `msg="partition lost"`) + strings.Count(log, `msg="membership lost; rejoining"`)
	}
	return n
}

// memberLogs is the tail of every member's log, for a failure's message.
func (e *snapEnv) memberLogs(n int) string {
	var b strings.Builder
	for i, m := range e.members {
		if m == nil {
			continue
		}
		fmt.Fprintf(&b, "\n--- member %d's log (its last %d bytes):\n%s", i+1, n, m.stderr.tail(n))
	}
	return b.String()
}

// close stops the members (as SIGTERM would), then the emulators, and
// keeps every process's peak RSS.
func (e *snapEnv) close() error {
	var errs []error
	for i, m := range e.members {
		if m == nil {
			continue
		}
		if u, err := m.usage(); err == nil {
			e.memberRSS[i] = u.PeakRSS
		}
		errs = append(errs, m.close())
		e.members[i] = nil
	}
	if e.o.logDir != "" {
		logs := map[string]*child{"source": e.src, "target": e.tgt}
		for i, m := range e.all {
			logs[fmt.Sprintf("member-%d", i+1)] = m
		}
		for name, c := range logs {
			if c == nil {
				continue
			}
			path := filepath.Join(e.o.logDir, fmt.Sprintf("%s-%s.log", strings.ReplaceAll(e.spec.name, "+", "-"), name))
			errs = append(errs, os.WriteFile(path, []byte(c.stderr.String()), 0o644))
		}
	}
	for _, c := range []*mongo.Client{e.srcClient, e.tgtClient} {
		if c != nil {
			_ = c.Disconnect(context.Background())
		}
	}
	for _, x := range []struct {
		c   *child
		rss *int64
	}{{e.src, &e.srcRSS}, {e.tgt, &e.tgtRSS}} {
		if x.c == nil {
			continue
		}
		if u, err := x.c.usage(); err == nil {
			*x.rss = u.PeakRSS
		}
		errs = append(errs, x.c.close())
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
	return errors.Join(errs...)
}

// rowCounter counts the snapshot rows the members' sinks took, per _id.
type rowCounter struct {
	mu     sync.Mutex
	counts []uint32 // by _id
	total  int64
	odd    int64 // rows whose _id is not a document's (negative)
}

func (r *rowCounter) add(ids []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.total++
		if id < 0 {
			r.odd++
			continue
		}
		if id >= int64(len(r.counts)) {
			r.counts = slices.Grow(r.counts, int(id)+1-len(r.counts))[:id+1]
		}
		r.counts[id]++
	}
}

func (r *rowCounter) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts, r.total, r.odd = nil, 0, 0
}

// count is how many rows of document id arrived.
func (r *rowCounter) count(id int64) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 0 || id >= int64(len(r.counts)) {
		return 0
	}
	return r.counts[id]
}

// rowStats sums the rows up.
type rowStats struct {
	Total    int64 `json:"rows"`
	Distinct int64 `json:"distinct"`
	// Again: rows beyond the first of their document.
	Again int64 `json:"again"`
}

func (r *rowCounter) stats() rowStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := rowStats{Total: r.total}
	for _, c := range r.counts {
		if c > 0 {
			s.Distinct++
			s.Again += int64(c - 1)
		}
	}
	s.Again += r.odd
	return s
}

// each calls f for every _id with rows, with its count.
func (r *rowCounter) each(f func(id int64, n uint32)) {
	r.mu.Lock()
	counts := slices.Clone(r.counts)
	r.mu.Unlock()
	for id, c := range counts {
		if c > 0 {
			f(int64(id), c)
		}
	}
}
