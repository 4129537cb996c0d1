package mongotest

import "go.mongodb.org/mongo-driver/v2/bson"

// serverMetrics are the counters serverStatus reports under metrics, as
// mongod counts them (recordCurOpMetrics), cumulative since the server
// started:
//
//   - document.returned: documents returned to clients in the batches of
//     find, aggregate and their getMores;
//   - document.inserted: documents inserted by insert commands and
//     bulkWrite inserts (not upserts, which mongod counts apart);
//   - document.updated: documents matched by update statements (update,
//     bulkWrite, findAndModify), modified or not;
//   - document.deleted: documents deleted by delete statements (delete,
//     bulkWrite, findAndModify);
//   - queryExecutor.scanned: index keys examined;
//   - queryExecutor.scannedObjects: documents examined.
//
// What reads examine follows the plan a real server runs: a collection
// scan examines every document it passes (no key), stopping at a limit
// when there is no sort; an index scan (indexscan.go) examines one key and
// one document per entry it passes; an _id lookup ({_id: v}, {_id: {$in:
// [...]}}) one key and one document per document found. A read at a
// snapshot counts only the documents (and keys) that existed at it. The
// emulator builds a find's whole result at the find, so a cursor's work is
// counted then, not batch by batch as mongod does: the totals agree once
// the cursor is exhausted. Writes count when their statement runs, in a
// transaction too (the server counts a statement, not its commit).
type serverMetrics struct {
	returned, inserted, updated, deleted int64
	scan                                 examined
}

// examined counts what reads examined: index keys and documents.
type examined struct {
	keys, docs int64
}

// section is serverStatus' metrics document.
func (m *serverMetrics) section() bson.D {
	return bson.D{
		{Key: "document", Value: bson.D{
			{Key: "deleted", Value: m.deleted},
			{Key: "inserted", Value: m.inserted},
			{Key: "returned", Value: m.returned},
			{Key: "updated", Value: m.updated},
		}},
		{Key: "queryExecutor", Value: bson.D{
			{Key: "scanned", Value: m.scan.keys},
			{Key: "scannedObjects", Value: m.scan.docs},
		}},
	}
}
