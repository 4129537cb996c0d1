package ferry

import (
	"math"
	"math/bits"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Partitioning says how a stream's documents are split among its
// partitions, by the hashed-index key of their _id ({$toHashedIndexKey:
// _id}, the int64 a {_id: "hashed"} index stores). It only matters with
// more than one partition.
type Partitioning string

const (
	// HashRange (the default) cuts the hashed-_id space [-2^63, 2^63) into
	// n contiguous ranges of equal size, as MongoDB's hashed sharding cuts
	// it into chunks: partition p holds the hashes in PartitionRange(p, n).
	// A partition is then a range of a {_id: "hashed"} index, so the
	// server can read one partition's documents, and only those, through
	// such an index (hint with min and max).
	HashRange Partitioning = "hash-range"
	// HashMod is the partitioning of streams created before HashRange:
	// partition p holds the documents whose |hash mod n| is p. A
	// partition is no range of any index: reading one partition's
	// documents means reading every document and keeping 1/n of them.
	// Part of no identity: a stream that checkpointed under it keeps it
	// (see WithPartitioning).
	HashMod Partitioning = "hash-mod"
)

// PartitionRange returns the inclusive range [lo, hi] of hashed-_id
// values partition p of n holds under HashRange: lo is MinInt64 +
// ⌊p·2^64/n⌋, computed exactly, and hi is one less than the next
// partition's lo, MaxInt64 for the last partition. The n ranges cover the
// whole int64 space without overlap, and their sizes differ by at most
// one. For p outside [0, n) it returns an empty range (lo > hi).
func PartitionRange(p, n int) (lo, hi int64) {
	if n < 1 || p < 0 || p >= n {
		return 0, -1
	}
	lo = rangeStart(p, n)
	if p == n-1 {
		return lo, math.MaxInt64
	}
	return lo, rangeStart(p+1, n) - 1
}

// rangeStart is MinInt64 + ⌊p·2^64/n⌋ for 0 <= p < n: the 128-bit p·2^64
// divided by n (the quotient fits 64 bits as p < n), offset by 2^63 in
// two's complement.
func rangeStart(p, n int) int64 {
	q, _ := bits.Div64(uint64(p), 0, uint64(n))
	return int64(q + 1<<63)
}

// PartitionMatch returns the aggregation expression (for $expr) that is
// true when {$toHashedIndexKey: value} falls in partition p of n under
// scheme; value is an expression such as "$documentKey._id" or "$_id".
// With n = 1 it is {$literal: true}; for p outside [0, n), {$literal:
// false}. An empty scheme is HashRange.
//
//   - HashRange: {$lte: [hash, hi]} for the first partition, {$gte: [hash,
//     lo]} for the last, both (the hash computed once, with $let) for the
//     others, lo and hi from PartitionRange.
//   - HashMod: {$eq: [{$abs: {$mod: [hash, n]}}, p]}.
func PartitionMatch(scheme Partitioning, value any, p, n int) bson.D {
	switch {
	case n < 1 || p < 0 || p >= n:
		return bson.D{{Key: "$literal", Value: false}}
	case n == 1:
		return bson.D{{Key: "$literal", Value: true}}
	}
	hash := bson.D{{Key: "$toHashedIndexKey", Value: value}}
	if scheme == HashMod {
		return bson.D{{Key: "$eq", Value: bson.A{
			bson.D{{Key: "$abs", Value: bson.D{{Key: "$mod", Value: bson.A{hash, int64(n)}}}}}, int64(p)}}}
	}
	lo, hi := PartitionRange(p, n)
	switch p {
	case 0:
		return bson.D{{Key: "$lte", Value: bson.A{hash, hi}}}
	case n - 1:
		return bson.D{{Key: "$gte", Value: bson.A{hash, lo}}}
	}
	return bson.D{{Key: "$let", Value: bson.D{
		{Key: "vars", Value: bson.D{{Key: "h", Value: hash}}},
		{Key: "in", Value: bson.D{{Key: "$and", Value: bson.A{
			bson.D{{Key: "$gte", Value: bson.A{"$$h", lo}}},
			bson.D{{Key: "$lte", Value: bson.A{"$$h", hi}}},
		}}}},
	}}}
}

// InPartition reports whether a hashed-_id value belongs to partition p
// of n under scheme (an empty scheme is HashRange): the same test
// PartitionMatch makes on the server.
func InPartition(scheme Partitioning, hash int64, p, n int) bool {
	switch {
	case n < 1 || p < 0 || p >= n:
		return false
	case n == 1:
		return true
	case scheme == HashMod:
		r := hash % int64(n)
		return r == int64(p) || r == -int64(p)
	}
	lo, hi := PartitionRange(p, n)
	return lo <= hash && hash <= hi
}

// validPartitioning reports whether p names a partitioning ("" is the
// default).
func validPartitioning(p Partitioning) bool {
	return p == "" || p == HashRange || p == HashMod
}
