package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Write concern. Every member applies a write as the primary commits it,
// so any acknowledged write concern that the replica set can satisfy is
// satisfied at once. One it cannot satisfy gets the writeConcernError a
// real replica set gives after applying the write: w greater than the
// number of data-bearing members is UnsatisfiableWriteConcern (100), a
// named mode (tag set) is UnknownReplWriteConcern (79), since the
// emulated set has no tags.

// writeConcernCommands are the commands whose writeConcern is waited for.
var writeConcernCommands = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true, "findandmodify": true,
	"bulkWrite": true, "commitTransaction": true, "abortTransaction": true,
	"create": true, "drop": true, "dropDatabase": true, "createIndexes": true, "dropIndexes": true,
	"deleteIndexes": true, "renameCollection": true, "collMod": true,
}

// writeConcernError returns the writeConcernError of a command that
// succeeded, or nil.
func (e *engine) writeConcernError(r *request) bson.D {
	if !writeConcernCommands[r.name] {
		return nil
	}
	wc, ok := lookupD(r.cmd, "writeConcern").(bson.D)
	if !ok {
		return nil
	}
	w, ok := lookupTop(wc, "w")
	if !ok {
		return nil
	}
	errInfo := bson.D{{Key: "writeConcern", Value: bson.D{
		{Key: "w", Value: w}, {Key: "wtimeout", Value: int32(0)}, {Key: "provenance", Value: "clientSupplied"},
	}}}
	switch x := w.(type) {
	case string:
		if x == "majority" {
			return nil
		}
		return bson.D{
			{Key: "code", Value: int32(mongoerr.CodeUnknownReplWriteConcern)},
			{Key: "codeName", Value: mongoerr.Name(mongoerr.CodeUnknownReplWriteConcern)},
			{Key: "errmsg", Value: "No write concern mode named '" + x + "' found in replica set configuration"},
			{Key: "errInfo", Value: errInfo},
		}
	default:
		n, ok := asInt64(w)
		if !ok || n <= int64(e.members()) {
			return nil
		}
		return bson.D{
			{Key: "code", Value: int32(mongoerr.CodeUnsatisfiableWriteConcern)},
			{Key: "codeName", Value: mongoerr.Name(mongoerr.CodeUnsatisfiableWriteConcern)},
			{Key: "errmsg", Value: "Not enough data-bearing nodes"},
			{Key: "errInfo", Value: errInfo},
		}
	}
}

// members is the number of data-bearing members of the replica set.
func (e *engine) members() int { return 1 + e.cfg.secondaries }

// normalizeWCE completes a writeConcernError given by a fail point the way
// the server re-serializes it: codeName beside code.
func normalizeWCE(wce bson.D) bson.D {
	if _, ok := lookupTop(wce, "codeName"); ok {
		return wce
	}
	code, ok := asInt64(lookupD(wce, "code"))
	if !ok {
		return wce
	}
	out := make(bson.D, 0, len(wce)+1)
	for _, el := range wce {
		out = append(out, el)
		if el.Key == "code" {
			out = append(out, bson.E{Key: "codeName", Value: mongoerr.Name(int32(code))})
		}
	}
	return out
}
