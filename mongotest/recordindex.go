package mongotest

import (
	"cmp"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// The ordered indexes: every collection keeps its _id index in _id order
// (BSON comparison order, mql.Compare), and every {_id: "hashed"} index
// in the order of the hashed _id (the int64 that {$toHashedIndexKey:
// "$_id"} returns); equal keys are in record (insertion) order, as a real
// server orders them by RecordId.
//
// An entry stands for a record of c.records, live or deleted: a deleted
// record stays in c.records (and in the indexes) while a snapshot may read
// it, so that an index scan at a snapshot finds every document that
// existed then. _id is immutable, so a record's keys never change: entries
// are added with the record (insert) and removed with it (the compaction
// that drops deleted records). A scan decides which entries it sees (see
// indexscan.go).

// idEntry is an entry of the _id index.
type idEntry struct {
	id  any
	rec *record
}

func cmpIDEntry(a, b idEntry) int {
	if c := mql.Compare(a.id, b.id); c != 0 {
		return c
	}
	return cmp.Compare(a.rec.ord, b.rec.ord)
}

// hashEntry is an entry of an {_id: "hashed"} index.
type hashEntry struct {
	h   int64
	rec *record
}

func cmpHashEntry(a, b hashEntry) int {
	if c := cmp.Compare(a.h, b.h); c != 0 {
		return c
	}
	return cmp.Compare(a.rec.ord, b.rec.ord)
}

// isHashedID reports whether an index key pattern is {_id: "hashed"}.
func isHashedID(key bson.D) bool {
	return len(key) == 1 && key[0].Key == "_id" && key[0].Value == "hashed"
}

// hashedID is a document's key in an {_id: "hashed"} index (a missing _id
// hashes as null, as $toHashedIndexKey does).
func hashedID(doc bson.D) int64 {
	id, _ := lookupTop(doc, "_id")
	h, _ := hashkey.Hash(id) // fails only for Go values with no BSON form
	return h
}

func docID(doc bson.D) any {
	id, _ := lookupTop(doc, "_id")
	return id
}

// indexRecord adds a new record's entries to the ordered indexes.
func (c *collection) indexRecord(r *record) {
	if c.idOrder == nil {
		c.idOrder = newOrdered(cmpIDEntry)
	}
	c.idOrder.insert(idEntry{id: docID(r.doc), rec: r})
	var h int64
	hashed := false
	for _, ix := range c.indexes {
		if ix.hashed != nil {
			if !hashed {
				h, hashed = hashedID(r.doc), true
			}
			ix.hashed.insert(hashEntry{h: h, rec: r})
		}
	}
}

// unindexDeleted removes the entries of the deleted records, which the
// compaction drops from c.records: one pass over each index, which keeps
// its order.
func (c *collection) unindexDeleted() {
	if c.idOrder != nil {
		c.idOrder.load(liveEntries(c.idOrder, func(x idEntry) *record { return x.rec }))
	}
	for _, ix := range c.indexes {
		if ix.hashed != nil {
			ix.hashed.load(liveEntries(ix.hashed, func(x hashEntry) *record { return x.rec }))
		}
	}
}

func liveEntries[T any](o *ordered[T], rec func(T) *record) []T {
	out := make([]T, 0, o.Len())
	o.ascend(position{}, func(x T) bool {
		if !rec(x).deleted {
			out = append(out, x)
		}
		return true
	})
	return out
}

// buildHashed fills a new {_id: "hashed"} index with the entries of every
// record of c, live or kept for snapshots.
func (c *collection) buildHashed(ix *index) {
	entries := make([]hashEntry, 0, len(c.records))
	for _, r := range c.records {
		if r != nil {
			entries = append(entries, hashEntry{h: hashedID(r.doc), rec: r})
		}
	}
	slices.SortFunc(entries, cmpHashEntry)
	ix.hashed.load(entries)
}
