package ferry

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// fragments reassembles the events $changeStreamSplitLargeEvent splits
// (events over 16 MB, MongoDB 7.0 and 6.0.9+). The server sends an event's
// fragments one after the other, each with its own resume token and
// splitEvent: {fragment: i, of: n}, the event's top-level fields spread
// over them in order. The reassembled event has every field of every
// fragment (splitEvent dropped), its _id and event id are the first
// fragment's token, and the position it checkpoints is the last
// fragment's, so a restart never resumes in the middle of an event: until
// the last fragment is read, the position stays before the first.
type fragments struct {
	parts   []bson.Raw
	first   bson.Raw // the first fragment's token
	of      int32
	before  bson.Raw // the stream's position before the first fragment
	size    int64
	started bool
}

// splitInfo returns an event's splitEvent {fragment, of}, if it has one.
func splitInfo(raw bson.Raw) (fragment, of int32, ok bool) {
	v, err := raw.LookupErr("splitEvent")
	if err != nil {
		return 0, 0, false
	}
	d, isDoc := v.DocumentOK()
	if !isDoc {
		return 0, 0, false
	}
	f, fok := d.Lookup("fragment").AsInt64OK()
	n, nok := d.Lookup("of").AsInt64OK()
	return int32(f), int32(n), fok && nok && f >= 1 && n >= f
}

// add takes fragment raw (fragment f of n) read after position before.
// It returns the whole event once the last fragment is in.
func (fr *fragments) add(raw, before bson.Raw, f, n int32) (bson.Raw, error) {
	switch {
	case f == 1:
		tok, err := raw.LookupErr("_id")
		if err != nil {
			return nil, fmt.Errorf("ferry: fragment 1 of %d has no _id", n)
		}
		*fr = fragments{first: tok.Document(), of: n, before: before, started: true}
	case !fr.started || f != int32(len(fr.parts))+1 || n != fr.of:
		got := len(fr.parts)
		fr.reset()
		return nil, fmt.Errorf("ferry: fragment %d of %d arrived after %d fragment(s) of an event: the stream must be reopened before the event", f, n, got)
	}
	fr.parts = append(fr.parts, raw)
	fr.size += int64(len(raw))
	if f < n {
		return nil, nil
	}
	whole, err := fr.join()
	fr.reset()
	return whole, err
}

// join builds the whole event: _id first (the first fragment's token),
// then every other field of every fragment in order, without splitEvent.
func (fr *fragments) join() (bson.Raw, error) {
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendDocumentElement(doc, "_id", fr.first)
	seen := map[string]bool{"_id": true, "splitEvent": true}
	for i, part := range fr.parts {
		elems, err := part.Elements()
		if err != nil {
			return nil, fmt.Errorf("ferry: fragment %d: %w", i+1, err)
		}
		for _, e := range elems {
			if seen[e.Key()] {
				continue
			}
			seen[e.Key()] = true
			doc = append(doc, e...)
		}
	}
	doc, err := bsoncore.AppendDocumentEnd(doc, idx)
	if err != nil {
		return nil, err
	}
	return bson.Raw(doc), nil
}

func (fr *fragments) reset() { *fr = fragments{} }

// active reports whether an event's fragments are being collected.
func (fr *fragments) active() bool { return fr.started }
