package ferry

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferry-io/ferry/deadletter"
)

// deadLetterEntry records ev, which failed attempts times (the last time
// with lastErr), as a dead-letter entry of stream. DeadLetterEvent turns the
// entry back into ev.
func deadLetterEntry(stream string, ev *Event, lastErr error, attempts int, first, last time.Time) deadletter.Entry {
	kind := deadletter.KindChange
	if ev.Backfill {
		kind = deadletter.KindBackfill
	}
	e := deadletter.Entry{Stream: stream, Partition: ev.Partition, EventID: ev.ID(), Kind: kind,
		Operation: ev.OperationType, Namespace: ev.Namespace.String(), DocumentKey: ev.DocumentKey, Event: ev.Raw,
		Error: lastErr.Error(), Attempts: attempts, FirstAt: first.UTC(), LastAt: last.UTC(), Epoch: ev.Epoch}
	if !ev.Backfill {
		e.ResumeAfter = ev.Token
	}
	if len(ev.Raw) > deadletter.MaxEventBytes {
		// Too large for an entry: its key, operation and size only.
		e.Event, e.Size = nil, len(ev.Raw)
	}
	return e
}

// DeadLetterEvent rebuilds the event a dead-letter entry recorded, as the
// handler saw it: same operation, namespace, documentKey, documents, Raw
// and event id (ID), under the entry's partition and epoch, so a receiver
// de-duplicating on the event id recognises a replay. Attempt is 0.
//
//   - A change event (Kind "change") is decoded from its raw change event
//     (ParseEvent); its id is derived from its resume token, as always.
//   - A backfill event (Kind "backfill") has no resume token: its Raw and
//     FullDocument are the stored document, its DocumentKey is
//     {_id: document._id}, its namespace comes from the entry's Namespace and
//     its id is the entry's EventID.
//
// Entries written before Kind was recorded are read by their operation:
// "backfill" is a backfill event, anything else a change event. An entry
// that cannot be rebuilt yields an error naming it (stream/eventId, the _id
// of its document in the dlq collection) and what to do about it.
func DeadLetterEvent(e deadletter.Entry) (*Event, error) {
	kind := e.Kind
	if kind == "" {
		kind = deadletter.KindChange
		if e.Operation == OperationBackfill {
			kind = deadletter.KindBackfill
		}
	}
	var ev *Event
	var err error
	switch kind {
	case deadletter.KindChange:
		ev, err = changeFromEntry(e)
	case deadletter.KindBackfill:
		ev, err = backfillFromEntry(e)
	default:
		return nil, fmt.Errorf("ferry: dead-letter entry %q has kind %q, which this version of ferry does not know "+
			"(written by a newer version?): replay it with that version", entryName(e), e.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("ferry: dead-letter entry %q (%s event): %w", entryName(e), kind, err)
	}
	return ev, nil
}

// entryName is how an operator finds an entry: its _id in the dlq
// collection.
func entryName(e deadletter.Entry) string { return e.Stream + "/" + e.EventID }

// removeHint says how to drop an entry that cannot be replayed.
func removeHint(e deadletter.Entry) string {
	return fmt.Sprintf("remove the entry (db.dlq.deleteOne({_id: %q}) in the state database)", entryName(e))
}

func changeFromEntry(e deadletter.Entry) (*Event, error) {
	if len(e.Event) == 0 {
		return nil, fmt.Errorf("it holds no change event, so there is nothing to replay; %s", removeHint(e))
	}
	ev, err := decodeEvent(e.Event, e.Partition, e.Epoch)
	if err != nil {
		return nil, fmt.Errorf("%w; it cannot be replayed: %s", err, removeHint(e))
	}
	return ev, nil
}

func backfillFromEntry(e deadletter.Entry) (*Event, error) {
	// The document is still in the source (or was deleted since): a new
	// backfill re-delivers its current state.
	lost := func(format string, args ...any) error {
		return fmt.Errorf(format+"; it cannot be replayed: %s, and re-deliver the document with a backfill "+
			"(start_at: backfill after ferry reset) or by touching it in the source", append(args, removeHint(e))...)
	}
	if e.EventID == "" {
		return nil, lost("it has no event id")
	}
	doc := e.Event
	if len(doc) == 0 {
		return nil, lost("it holds no document")
	}
	if err := doc.Validate(); err != nil {
		return nil, lost("its document is malformed: %v", err)
	}
	key, err := backfillKey(doc, nil)
	if err != nil {
		return nil, lost("%v", err)
	}
	if len(e.DocumentKey) > 0 {
		// On a sharded collection the recorded key also has the shard
		// key's fields: it must name the document's _id.
		recorded, err := e.DocumentKey.LookupErr("_id")
		if err != nil || !recorded.Equal(doc.Lookup("_id")) {
			return nil, lost("its documentKey %s does not match the document's _id (%s)", e.DocumentKey, key)
		}
		key = e.DocumentKey
	}
	// A database name never contains a dot; a collection name may.
	db, coll, ok := strings.Cut(e.Namespace, ".")
	if !ok || db == "" || coll == "" {
		return nil, lost("its namespace %q is not db.collection", e.Namespace)
	}
	return &Event{
		OperationType: OperationBackfill, Namespace: Namespace{DB: db, Coll: coll}, DocumentKey: key,
		FullDocument: doc, Raw: doc, Partition: e.Partition, Epoch: e.Epoch, Backfill: true, id: e.EventID,
	}, nil
}
