package mongotest

import (
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Snapshot reads outside transactions (readConcern {level: "snapshot",
// atClusterTime?}, MongoDB 5.0+).
//
// find, aggregate and distinct read the committed state as of a cluster
// time: atClusterTime when given, else the newest one, which the reply
// returns as atClusterTime so that a snapshot session reads every later
// command at the same point. Other commands refuse the read concern with
// InvalidOptions (72), as on a real server.
//
// A record keeps its earlier versions while a snapshot may still read
// them: while transactions are open, and from the first snapshot read on
// for minSnapshotHistoryWindowInSeconds (default 300 s, server clock)
// after the last one. A snapshot older than the window, or one that needs
// a version a write discarded while no history was kept, fails with
// SnapshotTooOld (239) rather than reading a state the emulator no longer
// has; a snapshot before the first snapshot read whose versions are all
// still there (nothing it reads changed since) reads as on a real server.

// defaultSnapshotWindow is minSnapshotHistoryWindowInSeconds' default.
const defaultSnapshotWindow = 300 * time.Second

// snapshotHistory tracks whether records keep their versions for snapshot
// reads.
type snapshotHistory struct {
	on bool
	// from is the first oplog sequence number whose writes kept the
	// versions they replaced.
	from    int64
	lastUse time.Time
	// dropped is the newest oplog sequence number whose write replaced
	// (or whose trim discarded) a version without keeping it: a snapshot
	// at or before it may lack a version it needs. A snapshot after it
	// reads exactly what a real server's history would give it.
	dropped int64
	// droppedIn is dropped per collection ("db.coll"): a find or distinct
	// reads one collection, whose own writes alone can lack its versions.
	droppedIn map[string]int64
}

// noteDropped records that a write at seq (or a trim up to it) discarded
// a version of a record of c.
func (e *engine) noteDropped(c *collection, seq int64) {
	e.snapHist.dropped = max(e.snapHist.dropped, seq)
	if c == nil {
		return
	}
	if e.snapHist.droppedIn == nil {
		e.snapHist.droppedIn = map[string]int64{}
	}
	ns := c.db + "." + c.name
	e.snapHist.droppedIn[ns] = max(e.snapHist.droppedIn[ns], seq)
}

// snapshotReadCommands may read at a snapshot outside a transaction.
var snapshotReadCommands = map[string]bool{"find": true, "aggregate": true, "distinct": true}

// keepHistory reports whether a record about to change must keep its
// current version for a snapshot that may read it. Callers hold e.mu.
func (e *engine) keepHistory() bool {
	if e.activeTxns > 0 {
		return true
	}
	if !e.snapHist.on {
		return false
	}
	if e.nowLocked().Sub(e.snapHist.lastUse) > e.params.snapshotWindow {
		e.snapHist.on = false
		return false
	}
	return true
}

// historyFloor is the oldest snapshot (an oplog sequence number) that an
// open transaction or a snapshot read within the window may still read.
func (e *engine) historyFloor() int64 {
	floor := e.oplog.nextSeq
	for _, s := range e.sessions {
		if t := s.txn; t != nil && t.state == txnActive && t.snap < floor {
			floor = t.snap
		}
	}
	if e.snapHist.on {
		oldest := e.oplog.seqAfter(bson.Timestamp{T: uint32(e.nowLocked().Add(-e.params.snapshotWindow).Unix())})
		floor = min(floor, max(e.snapHist.from, oldest))
	}
	return floor
}

// trimHistory drops the versions of rec that no snapshot at or after the
// floor reads: all but the newest one older than the floor.
func (e *engine) trimHistory(c *collection, rec *record) {
	if len(rec.history) < 8 {
		return
	}
	floor := e.historyFloor()
	k := -1
	for i, v := range rec.history {
		if v.seq < floor {
			k = i
		}
	}
	if k > 0 {
		e.noteDropped(c, rec.history[k].seq)
		rec.history = append(rec.history[:0:0], rec.history[k:]...)
	}
}

// seqAfter returns the sequence number of the first entry with ts > t: a
// snapshot at t sees exactly the entries before it.
func (o *oplog) seqAfter(t bson.Timestamp) int64 {
	i := sort.Search(len(o.entries), func(i int) bool { return tsLess(t, o.entries[i].ts) })
	if i == len(o.entries) {
		return o.nextSeq
	}
	return o.entries[i].seq
}

// snapshotAt returns the snapshot (an oplog sequence number) that reads
// the state as of cluster time at, and keeps history from now on for the
// snapshots that follow. ns is the one collection the read reads ("db.coll"),
// or "" for any. Callers hold e.mu.
func (e *engine) snapshotAt(at bson.Timestamp, ns string) (int64, error) {
	now := e.nowLocked()
	if !e.snapHist.on || now.Sub(e.snapHist.lastUse) > e.params.snapshotWindow {
		// History is complete from now on, or from the oldest open
		// transaction's snapshot, whose writes have kept versions since.
		e.snapHist.on = false
		e.snapHist.from = e.historyFloor()
		e.snapHist.on = true
	}
	e.snapHist.lastUse = now
	if tsLess(e.lastTS, at) && (e.cfg.sharding.clock == nil || tsLess(e.cfg.sharding.clock.current(), at)) {
		// (A shard reads at a cluster time another member gave out after
		// its own last write: its state then is its latest.)
		return 0, errorf(mongoerr.CodeInvalidOptions, "readConcern atClusterTime %d.%d is newer than the latest cluster time %d.%d",
			at.T, at.I, e.lastTS.T, e.lastTS.I)
	}
	snap := e.oplog.seqAfter(at)
	// A real server keeps every version for the window; the emulator keeps
	// them from the first snapshot read on, and refuses only a snapshot
	// whose versions it discarded (a write since then without history).
	if int64(at.T) < now.Add(-e.params.snapshotWindow).Unix() || snap <= e.droppedFor(ns) {
		return 0, errorf(mongoerr.CodeSnapshotTooOld, "Read timestamp Timestamp(%d, %d) is older than the oldest available timestamp.", at.T, at.I)
	}
	return snap, nil
}

// droppedFor is the newest write that discarded a version a snapshot of
// ns ("": of any collection) may need.
func (e *engine) droppedFor(ns string) int64 {
	if ns == "" {
		return e.snapHist.dropped
	}
	if d, ok := e.snapHist.droppedIn[ns]; ok {
		return d
	}
	return -1
}

// checkReadConcern prepares a command outside a transaction for its read
// concern: a snapshot read gets a read-only transaction at its snapshot.
// Callers hold e.mu.
func (e *engine) checkReadConcern(r *request) error {
	rc, ok := lookupD(r.cmd, "readConcern").(bson.D)
	if !ok {
		return nil
	}
	level, _ := lookupD(rc, "level").(string)
	at, hasAt := lookupD(rc, "atClusterTime").(bson.Timestamp)
	if level != "snapshot" {
		if _, given := lookupTop(rc, "atClusterTime"); given {
			return errorf(mongoerr.CodeInvalidOptions, "readConcern atClusterTime is only valid with level \"snapshot\"")
		}
		return nil
	}
	if !snapshotReadCommands[r.name] || r.name == "aggregate" && pipelineWrites(r) {
		return errorf(mongoerr.CodeInvalidOptions, "Command %s does not support { readConcern: { level: \"snapshot\" } } outside a multi-document transaction", r.name)
	}
	if r.name == "aggregate" && e.isChangeStreamRequest(r) {
		return errorf(mongoerr.CodeInvalidOptions, "$changeStream does not support { readConcern: { level: \"snapshot\" } }")
	}
	if !hasAt {
		at = e.lastTS
	}
	// find and distinct read their own collection only.
	ns := ""
	if r.name == "find" || r.name == "distinct" {
		if coll, ok := r.cmd[0].Value.(string); ok {
			ns = r.db + "." + coll
		}
	}
	snap, err := e.snapshotAt(at, ns)
	if err != nil {
		return err
	}
	r.txn = &txn{snap: snap, state: txnActive, readOnly: true}
	if e.ownsAt != nil && r.conn != nil && r.conn.viaRouter {
		// A shard's read for a mongos: the documents it owned at that
		// time (its orphans then, a migration's copies not yet
		// committed or its donor's left after, filtered out).
		r.txn.owns = func(c *collection, d bson.D) bool { return c.shardKey == nil || e.ownsAt(c, d, at) }
	}
	r.atClusterTime = &at
	return nil
}

// pipelineWrites reports whether an aggregate ends with $out or $merge.
func pipelineWrites(r *request) bool {
	p, _ := lookupD(r.cmd, "pipeline").(bson.A)
	for _, st := range p {
		if d, ok := st.(bson.D); ok && len(d) > 0 && (d[0].Key == "$out" || d[0].Key == "$merge") {
			return true
		}
	}
	return false
}

// withAtClusterTime adds the snapshot's time to a read's reply: in the
// cursor document (find, aggregate) or at the top level (distinct).
func withAtClusterTime(reply bson.D, at bson.Timestamp) bson.D {
	for i, el := range reply {
		if cur, ok := el.Value.(bson.D); ok && el.Key == "cursor" {
			out := append(bson.D(nil), reply...)
			out[i].Value = append(append(bson.D(nil), cur...), bson.E{Key: "atClusterTime", Value: at})
			return out
		}
	}
	return append(reply, bson.E{Key: "atClusterTime", Value: at})
}
