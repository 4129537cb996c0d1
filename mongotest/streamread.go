package mongotest

import (
	"errors"

	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Change-stream batches are built outside the engine lock. A getMore holds
// e.mu only to copy the oplog entries after its stream's position (a
// window of at most 4096 of them) together with what a batch needs
// of the engine's state at that moment: the newest entry, the channel the
// next write closes, and $$NOW / $$CLUSTER_TIME. Turning entries into
// events, running the stream's pipeline and encoding then happen without
// the lock, so concurrent change streams and writers do not serialise on
// it. This keeps every guarantee a batch built under the lock had:
//
//   - Entries are immutable once logged (their encoding caches have a lock
//     of their own), and a window is a consistent prefix of the oplog: the
//     writes of one transaction, appended under one hold of e.mu, are in
//     a window entirely or not yet.
//   - The stream's state (position, buffered events, resume token) belongs
//     to the cursor, whose lock the getMore holds throughout.
//   - The postBatchResumeToken moves to a high-water mark only up to the
//     newest entry of the last window, and only once the stream has
//     scanned past it; a window whose start has left the oplog fails with
//     ChangeStreamHistoryLost, as the scan under the lock did.
//   - A getMore that finds nothing waits on the channel taken with the
//     last window, which any later write closes: no write is missed.
//   - updateLookup reads the current document under e.mu, one event at a
//     time, as a real server looks each one up.
//
// The first batch, returned by the aggregate that opens the stream, is
// still built under the lock that command holds (oplogReader.locked).

// defaultStreamWindow bounds how many oplog entries a getMore copies under
// the lock at a time (engine.streamWindow; tests make it smaller).
const defaultStreamWindow = 4096

// oplogReader hands a change stream the oplog entries from its position on.
type oplogReader struct {
	e *engine
	// locked: the caller holds e.mu for the whole batch, and the reader
	// reads the oplog in place.
	locked bool
	window []*oplogEntry
	// nextSeq is the sequence number of window[0]; more reports entries
	// in the oplog after the window.
	nextSeq int64
	more    bool
	// lost: the stream's position had left the oplog when the window was
	// taken.
	lost bool
	// last is the oplog's newest entry, wake the channel the next write
	// closes and closed whether the engine was shutting down, when the
	// window was taken; vars are the pipeline variables of the batch.
	last   *oplogEntry
	wake   chan struct{}
	closed bool
	vars   *mql.Vars
}

// newOplogReader takes the first window for a stream at seq. Callers hold
// e.mu; with locked, they keep holding it while the reader is used.
func (e *engine) newOplogReader(seq int64, locked bool) *oplogReader {
	rd := &oplogReader{e: e, locked: locked, vars: e.vars()}
	rd.fill(seq)
	return rd
}

// fill takes the window from seq. Callers hold e.mu.
func (rd *oplogReader) fill(seq int64) {
	o := &rd.e.oplog
	rd.last, rd.wake, rd.closed = o.last(), rd.e.newEntry, rd.e.closed
	rd.nextSeq = seq
	rd.lost = o.first() != nil && seq < o.first().seq
	if rd.lost {
		rd.window, rd.more = nil, false
		return
	}
	rest := o.entries[o.indexOfSeq(seq):]
	if rd.locked {
		rd.window, rd.more = rest, false
		return
	}
	n := min(len(rest), max(rd.e.streamWindow, 1))
	rd.window = append(rd.window[:0], rest[:n]...)
	rd.more = n < len(rest)
}

// next returns the entry with sequence number seq (the stream's position)
// or the first after it, nil at the end of the oplog as of the last
// window, or ChangeStreamHistoryLost.
func (rd *oplogReader) next(seq int64) (*oplogEntry, error) {
	for {
		if rd.lost {
			return nil, historyLost()
		}
		if i := seq - rd.nextSeq; i >= 0 && i < int64(len(rd.window)) {
			return rd.window[i], nil
		} else if i < 0 && len(rd.window) > 0 {
			return rd.window[0], nil
		}
		if !rd.more {
			return nil, nil
		}
		rd.e.mu.Lock()
		rd.fill(seq)
		rd.e.mu.Unlock()
	}
}

// errLookupLater ends a shard's first batch before an update whose
// updateLookup must look on other shards (see oplogReader.postImage).
var errLookupLater = errors.New("mongotest: the lookup waits for the next getMore")

// postImage is e.postImage under the engine lock. On a shard, an
// updateLookup of a sharded collection's document looks where the
// document lives now (clusterMeta.lookupDocument), which takes other
// shards' locks and the collection's migration lock: a first batch, built
// under this shard's lock, ends before such an event (errLookupLater), and
// the next getMore looks it up.
func (rd *oplogReader) postImage(cs *changeStream, ent *oplogEntry) (any, error) {
	if rd.locked && cs.fullDocument == "updateLookup" && rd.e.cfg.sharding.lookup != nil {
		if c := rd.e.coll(ent.db, ent.coll); c != nil && c.shardKey != nil {
			return nil, errLookupLater
		}
	}
	if rd.locked || cs.fullDocument != "updateLookup" {
		return rd.e.postImage(cs, ent)
	}
	if lookup := rd.e.cfg.sharding.lookup; lookup != nil {
		if doc, sharded := lookup(ent.db, ent.coll, ent.docKey); sharded {
			return doc, nil
		}
	}
	rd.e.mu.Lock()
	defer rd.e.mu.Unlock()
	return rd.e.postImage(cs, ent)
}
