package checkpoint

import "fmt"

// CorruptError is the error of a stored checkpoint record that cannot be
// decoded. It matches ErrCorrupt. It names the record as its store keeps
// it (Record), so that an operator can find it, and says what is wrong
// with it (Problem); it never quotes the record's values.
type CorruptError struct {
	Stream    string
	Partition int
	// Record is where the record is kept, as its store names it: for
	// mongostore the collection and _id (ferry.checkpoints _id "orders/0"),
	// for boltstore the file and key. Empty when the store cannot say.
	Record string
	// Problem is what cannot be read: "field token has BSON type string",
	// "field version is missing".
	Problem string
}

// Error names the record and the problem.
func (e *CorruptError) Error() string {
	where := e.Record
	if where == "" {
		where = fmt.Sprintf("of stream %q partition %d", e.Stream, e.Partition)
	}
	return fmt.Sprintf("%v %s: %s", ErrCorrupt, where, e.Problem)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// Locator is implemented by stores that can say where a partition's
// record is kept, in the terms CorruptError.Record uses: tools name it in
// their messages (a resume token the server refuses, a record to repair).
type Locator interface {
	RecordName(stream string, partition int) string
}

// RecordName is where store keeps a partition's record, or "" when the
// store does not say (it is not a Locator).
func RecordName(store Store, stream string, partition int) string {
	if l, ok := store.(Locator); ok {
		return l.RecordName(stream, partition)
	}
	return ""
}
