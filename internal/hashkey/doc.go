// Package hashkey computes MongoDB's hashed-index key: the 64-bit value a real
// mongod stores in a {field: "hashed"} index, uses for hashed shard keys, and
// returns from the $toHashedIndexKey aggregation expression.
//
// Guarantee: for every BSON value v, Hash(v) equals what a real server
// returns for {$toHashedIndexKey: v} (and stores in a hashed index built
// with the default seed 0 and the simple collation). Ferry relies on this to
// partition change streams by ranges of the hash (ferry.HashRange)
//
//	{$match: {$expr: {$and: [{$gte: [{$toHashedIndexKey: "$documentKey._id"}, lo]}, {$lte: [..., hi]}]}}}
//
// or, for streams created before, by its remainder (ferry.HashMod)
//
//	{$match: {$expr: {$eq: [{$abs: {$mod: [{$toHashedIndexKey: "$documentKey._id"}, N]}}, p]}}}
//
// so that a document is routed to the same partition on the mongotest
// emulator and on a real MongoDB, and to compute on the client the
// partition of a scanned document.
//
// The algorithm follows the server's BSONElementHasher::hash64
// (src/mongo/db/hasher.cpp) exactly:
//
//   - An MD5 digest is fed the seed (int32, little-endian, 0 for hashed
//     indexes), then the value. The result is the first 8 bytes of the digest
//     read as a little-endian int64.
//   - Every value contributes its canonical type (canonicalizeBSONType in
//     src/mongo/bson/bsontypes.h) as a little-endian int32. Types that compare
//     as equal share a canonical type: int32, int64, double and decimal128
//     are all 10, string and symbol are both 15, undefined is 0 like EOO.
//     MinKey is -1 and MaxKey 127.
//   - Numbers are squashed to int64 (BSONElement::safeNumberLongForHash) and
//     hashed as 8 little-endian bytes, so 3, NumberLong(3) and 3.9 hash the
//     same. Doubles are truncated toward zero, NaN is 0, values ≥ 2^63 clamp
//     to MaxInt64 except exactly 2^63, which becomes MinInt64 (a compatibility
//     quirk the server preserves), and values < -2^63 clamp to MinInt64.
//     Decimal128 is rounded half-to-even, NaN is 0, and out-of-range values
//     (including infinities) clamp to MinInt64/MaxInt64.
//   - Other scalars contribute their BSON value bytes verbatim: strings,
//     symbols and code as int32 length, bytes and the terminating NUL;
//     binData as int32 length, subtype and bytes; ObjectId 12 bytes; bool one
//     byte; date and timestamp 8 bytes; regex pattern and options as two
//     NUL-terminated strings; DBPointer as string then ObjectId; null,
//     undefined, MinKey and MaxKey nothing.
//   - Documents and arrays contribute, for each element, its canonical type,
//     its field name with the terminating NUL (array indexes "0", "1", …)
//     and its value hashed recursively, then an end marker (canonical type 0
//     and nothing else). Code with scope contributes its code bytes with the
//     NUL, then its scope like a document.
//
// Hash accepts the Go values bson.Unmarshal produces for a bson.D (and the
// usual Go numeric aliases); HashRaw hashes undecoded BSON. Regex options
// and binary subtype 2 are hashed as they would appear on the wire. Values
// with no defined order (maps of more than one key) and unsupported Go types
// are rejected with an error; nothing panics on bad input.
//
// Not covered: hashed indexes on a collection with a non-simple collation
// hash strings by their collation key; $toHashedIndexKey (and this package)
// never does.
package hashkey
