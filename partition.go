package ferry

import "go.mongodb.org/mongo-driver/v2/bson"

// partitionExpr is the expression ($expr operand) that value, an
// expression for a document's _id, falls in the consumer's partition.
func (c *Consumer) partitionExpr(value any) bson.D {
	return bson.D{{Key: "$eq", Value: bson.A{
		bson.D{{Key: "$abs", Value: bson.D{{Key: "$mod", Value: bson.A{
			bson.D{{Key: "$toHashedIndexKey", Value: value}}, int64(c.cfg.partitions)}}}}},
		int64(c.cfg.partition),
	}}}
}

// partitionRange is the inclusive hashed-_id range of the consumer's
// partition, ok false when partitions are not ranges.
func (c *Consumer) partitionRange() (lo, hi int64, ok bool) {
	if c.cfg.partitions == 1 {
		return -1 << 63, 1<<63 - 1, true
	}
	return 0, 0, false
}
