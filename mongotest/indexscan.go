package mongotest

import (
	"slices"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Index scans: a find planned on an index range (findplan.go) reads the
// index's entries from the range's start in key order, and for each one
// the document the read sees: the current one, or at a snapshot (a
// transaction, readConcern "snapshot") the record's version at that
// snapshot, with the transaction's own writes. An entry whose record did
// not exist at the snapshot (inserted after it, deleted before it) is not
// there for the read: it is neither returned nor counted. Documents the
// transaction inserted are merged in at their keys' places. Each entry
// read counts one key and one document examined (metrics.go); every
// document is tested against the whole filter (an $expr that fails on one
// fails the find, as on a real server), and the scan stops at the range's
// end or once limit documents (0: no limit) matched.

// scanIndex reads the range of plan. Callers hold e.mu.
func (e *engine) scanIndex(r *request, c *collection, plan *indexPlan, f *mql.Filter, vars *mql.Vars, limit int) ([]docRef, error) {
	if plan.keys.empty() {
		return nil, nil
	}
	s := &indexScanState{e: e, c: c, f: f, vars: vars, limit: limit}
	if limit > 0 {
		s.out = make([]docRef, 0, min(limit, 4096)) // a snapshot's chunk: its size
	}
	if r != nil {
		s.t = r.txn
	}
	lo, hi := plan.keys.lo, plan.keys.hi
	if plan.hashed != nil {
		s.extras = s.txnInserts(func(d bson.D) (any, bool) {
			h := hashedID(d)
			return h, lo.sideInt(h) > 0 && hi.sideInt(h) < 0
		})
		// The hashed order is no order of the records in memory: the
		// records of each run of entries are touched together first, so
		// that their fetches (cache lines, page translations) overlap
		// rather than stall the scan one by one (storedBatch.appendArray
		// does the same with the documents' bytes).
		ord := plan.hashed.hashed
		ord.ascendTouched(ord.seek(func(x hashEntry) int { return lo.sideInt(x.h) }), touchRun(limit), func(x hashEntry) {
			s.touched += x.rec.seq
		}, func(x hashEntry) bool {
			if hi.sideInt(x.h) > 0 {
				return false
			}
			return s.flushBefore(func(k any) bool { return cmpInt64(x.h, k) > 0 }) && s.entry(x.rec)
		})
		touchSink.Add(s.touched)
	} else if c.idOrder != nil {
		s.extras = s.txnInserts(func(d bson.D) (any, bool) {
			id := docID(d)
			return id, lo.side(id) > 0 && hi.side(id) < 0
		})
		c.idOrder.ascend(c.idOrder.seek(func(x idEntry) int { return lo.side(x.id) }), func(x idEntry) bool {
			if hi.side(x.id) > 0 {
				return false
			}
			return s.flushBefore(func(k any) bool { return mql.Compare(x.id, k) > 0 }) && s.entry(x.rec)
		})
	}
	if !s.stopped {
		s.flushBefore(func(any) bool { return true })
	}
	return s.out, s.err
}

// indexScanState is one index scan under way.
type indexScanState struct {
	e     *engine
	c     *collection
	t     *txn // nil: the current state
	f     *mql.Filter
	vars  *mql.Vars
	limit int

	// extras are the documents the transaction inserted in the range, in
	// key order, not yet read.
	extras []keyedDoc
	out    []docRef
	err    error
	// stopped is set once the scan ended early (limit, error).
	stopped bool
	// touched sums what the scan read ahead (ascendTouched), so that the
	// reads are not optimised away.
	touched int64
}

// touchRun is how many entries a hashed index scan touches at a time
// (ascendTouched): up to its limit (a snapshot's chunk), at most maxTouchRun.
func touchRun(limit int) int {
	if limit > 0 && limit < maxTouchRun {
		return limit
	}
	return maxTouchRun
}

// maxTouchRun bounds a run of touches: its records and documents' first
// bytes stay in the caches until they are read.
const maxTouchRun = 64

// touchSink receives what scans read ahead.
var touchSink atomic.Int64

type keyedDoc struct {
	key any
	doc bson.D
}

// txnInserts returns the documents the transaction inserted into the
// collection whose key (keyOf) falls in the range, in key order (equal
// keys in insertion order).
func (s *indexScanState) txnInserts(keyOf func(bson.D) (any, bool)) []keyedDoc {
	if s.t == nil {
		return nil
	}
	loc := s.t.local[s.c]
	var out []keyedDoc
	for _, key := range s.t.order[s.c] {
		ld := loc[key]
		if ld == nil || ld.rec != nil || ld.doc == nil {
			continue
		}
		if k, in := keyOf(ld.doc); in {
			out = append(out, keyedDoc{key: k, doc: ld.doc})
		}
	}
	slices.SortStableFunc(out, func(a, b keyedDoc) int { return mql.Compare(a.key, b.key) })
	return out
}

// flushBefore reads the extras whose key comes before the current entry
// (after(key) reports it), and reports whether the scan goes on.
func (s *indexScanState) flushBefore(after func(key any) bool) bool {
	for len(s.extras) > 0 && after(s.extras[0].key) {
		d := s.extras[0].doc
		s.extras = s.extras[1:]
		if !s.read(docRef{doc: d}) {
			return false
		}
	}
	return true
}

// entry reads an entry's record as the scan sees it, and reports whether
// the scan goes on.
func (s *indexScanState) entry(rec *record) bool {
	if s.t == nil {
		if rec.deleted {
			return true
		}
		return s.read(docRef{rec: rec, doc: rec.doc, raw: rec.raw})
	}
	d, raw := rec.versionAt(s.t.snap)
	if d == nil {
		return true
	}
	if s.t.owns != nil && !s.t.owns(s.c, d) {
		// An orphan at the snapshot's time, examined and filtered out.
		s.e.metrics.scan.keys++
		s.e.metrics.scan.docs++
		return true
	}
	if loc := s.t.local[s.c]; loc != nil {
		if ld, ok := loc[keyOf(d[0].Value)]; ok && ld.rec == rec {
			if ld.doc == nil {
				return true
			}
			d, raw = ld.doc, nil
		}
	}
	return s.read(docRef{rec: rec, doc: d, raw: raw})
}

// read examines one document.
func (s *indexScanState) read(ref docRef) bool {
	s.e.metrics.scan.keys++
	s.e.metrics.scan.docs++
	ok, err := s.f.MatchErr(ref.doc, s.vars)
	if err != nil {
		s.err, s.stopped = err, true
		return false
	}
	if ok {
		s.out = append(s.out, ref)
		if s.limit > 0 && len(s.out) >= s.limit {
			s.stopped = true
			return false
		}
	}
	return true
}
