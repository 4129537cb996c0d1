package mql

import (
	"github.com/ferry-io/ferry/internal/hashkey"

	"github.com/ferry-io/ferry/mongoerr"
)

// $toHashedIndexKey returns, as an int64, the key a hashed index stores for
// its argument; a missing argument hashes as null, like on the server
// (ExpressionToHashedIndexKey). hashkey.Hash reproduces the server's hash
// bit for bit, so partition filters on it (Ferry's ranges of the hash,
// {$gte: [{$toHashedIndexKey: "$documentKey._id"}, lo]}, or its older
// {$abs: {$mod: [{$toHashedIndexKey: "$documentKey._id"}, N]}}) route the
// same documents as on a real MongoDB.
func init() {
	RegisterOperator("$toHashedIndexKey", 1, 1, func(args []any) (any, error) {
		h, err := hashkey.Hash(args[0])
		if err != nil {
			// Only a Go value with no BSON form can get here.
			return nil, errf(mongoerr.CodeBadValue, "$toHashedIndexKey: %v", err)
		}
		return h, nil
	})
}
