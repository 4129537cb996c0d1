package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/sink/mongoproj"
)

// projDiff is how a projection differs from its source, document by
// document (by _id, every field but the sink's own).
type projDiff struct {
	Source     int64 `json:"source"`     // documents in the source
	Live       int64 `json:"live"`       // live documents in the projection
	Tombstones int64 `json:"tombstones"` // deleted documents the projection remembers
	Missing    int64 `json:"missing"`    // in the source, not live in the projection
	// Resurrected: live in the projection, gone from the source (deleted,
	// or never there).
	Resurrected int64 `json:"resurrected"`
	// Stale: in both, with other contents (an older version).
	Stale int64 `json:"stale"`
	// Examples: a few _ids of each kind.
	Examples []string `json:"examples,omitempty"`
}

func (d projDiff) equal() bool { return d.Missing == 0 && d.Resurrected == 0 && d.Stale == 0 }

func (d projDiff) String() string {
	s := fmt.Sprintf("%d source documents, %d live in the projection (+%d tombstones): %d missing, %d resurrected, %d stale",
		d.Source, d.Live, d.Tombstones, d.Missing, d.Resurrected, d.Stale)
	if len(d.Examples) > 0 {
		s += " (" + strings.Join(d.Examples, ", ") + ")"
	}
	return s
}

func (d *projDiff) example(kind string, id int64) {
	if len(d.Examples) < 6 {
		d.Examples = append(d.Examples, fmt.Sprintf("%s _id %d", kind, id))
	}
}

// compareProjection reads the source and the projection in _id order, side
// by side, and compares every document: all of its fields but the
// projection's bookkeeping (mongoproj.Field), in any order, each value of
// the same type and bytes. The _ids must be numbers the server orders as
// int64 (the bench's documents).
func compareProjection(ctx context.Context, src, proj *mongo.Collection) (projDiff, error) {
	var d projDiff
	open := func(c *mongo.Collection) (*mongo.Cursor, error) {
		return c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(1000))
	}
	sc, err := open(src)
	if err != nil {
		return d, fmt.Errorf("read the source: %w", err)
	}
	defer sc.Close(context.WithoutCancel(ctx))
	pc, err := open(proj)
	if err != nil {
		return d, fmt.Errorf("read the projection: %w", err)
	}
	defer pc.Close(context.WithoutCancel(ctx))

	// next advances a cursor to its next document (nil at the end); the
	// projection's skips and counts tombstones.
	nextSrc := func() (bson.Raw, int64, error) {
		if !sc.Next(ctx) {
			return nil, 0, sc.Err()
		}
		d.Source++
		id, err := idOf(sc.Current)
		return sc.Current, id, err
	}
	nextProj := func() (bson.Raw, int64, error) {
		for pc.Next(ctx) {
			if del, ok := pc.Current.Lookup(mongoproj.Field, "del").BooleanOK(); ok && del {
				d.Tombstones++
				continue
			}
			d.Live++
			id, err := idOf(pc.Current)
			return pc.Current, id, err
		}
		return nil, 0, pc.Err()
	}
	s, sid, err := nextSrc()
	if err != nil {
		return d, err
	}
	p, pid, err := nextProj()
	if err != nil {
		return d, err
	}
	for s != nil || p != nil {
		switch {
		case p == nil || s != nil && sid < pid:
			d.Missing++
			d.example("missing", sid)
			if s, sid, err = nextSrc(); err != nil {
				return d, err
			}
		case s == nil || pid < sid:
			d.Resurrected++
			d.example("resurrected", pid)
			if p, pid, err = nextProj(); err != nil {
				return d, err
			}
		default:
			same, err := sameFields(s, p, mongoproj.Field)
			if err != nil {
				return d, err
			}
			if !same {
				d.Stale++
				d.example("stale", sid)
			}
			if s, sid, err = nextSrc(); err != nil {
				return d, err
			}
			if p, pid, err = nextProj(); err != nil {
				return d, err
			}
		}
	}
	return d, nil
}

func idOf(doc bson.Raw) (int64, error) {
	v, err := doc.LookupErr("_id")
	if err != nil {
		return 0, err
	}
	id, ok := v.AsInt64OK()
	if !ok {
		return 0, fmt.Errorf("a document whose _id is a %s, not a number", v.Type)
	}
	return id, nil
}

// sameFields reports whether a and b have the same fields, skip aside, in
// any order, each with the same type and value bytes.
func sameFields(a, b bson.Raw, skip string) (bool, error) {
	fields := func(doc bson.Raw) (map[string]bson.RawValue, error) {
		elems, err := doc.Elements()
		if err != nil {
			return nil, err
		}
		m := make(map[string]bson.RawValue, len(elems))
		for _, e := range elems {
			if k := e.Key(); k != skip {
				m[k] = e.Value()
			}
		}
		return m, nil
	}
	fa, err := fields(a)
	if err != nil {
		return false, err
	}
	fb, err := fields(b)
	if err != nil {
		return false, err
	}
	if len(fa) != len(fb) {
		return false, nil
	}
	for k, va := range fa {
		vb, ok := fb[k]
		if !ok || va.Type != vb.Type || !bytes.Equal(va.Value, vb.Value) {
			return false, nil
		}
	}
	return true, nil
}
