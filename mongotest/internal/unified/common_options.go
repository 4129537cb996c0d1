package unified

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/tag"
)

// This file converts the "Common Options" of the format (readConcern,
// readPreference, writeConcern, collectionOrDatabaseOptions) into driver
// values.

func parseReadConcern(d bson.Raw, where string) (*readconcern.ReadConcern, error) {
	r := newFields(d, where)
	rc := &readconcern.ReadConcern{Level: r.reqStr("level")}
	return rc, r.done("field")
}

func parseWriteConcern(d bson.Raw, where string) (*writeconcern.WriteConcern, error) {
	r := newFields(d, where)
	wc := &writeconcern.WriteConcern{Journal: r.boolPtr("journal")}
	if v, ok := r.value("w"); ok {
		if s, ok := v.StringValueOK(); ok {
			wc.W = s
		} else if n, ok := asInt64(v); ok {
			wc.W = int(n)
		} else {
			r.fail("w must be a string or an integer")
		}
	}
	if r.has("wtimeoutMS") {
		r.unsupportedByDriver("has no wtimeoutMS (write concern timeouts come from contexts)")
	}
	return wc, r.done("field")
}

func parseReadPreference(d bson.Raw, where string) (*readpref.ReadPref, error) {
	r := newFields(d, where)
	mode, err := readpref.ModeFromString(r.reqStr("mode"))
	if err != nil && r.err == nil {
		r.fail("%v", err)
	}
	var opts []readpref.Option
	for i, ts := range r.docs("tagSets") {
		var set tag.Set
		elems, _ := ts.Elements()
		for _, e := range elems {
			s, ok := e.Value().StringValueOK()
			if !ok {
				r.fail("tagSets[%d].%s must be a string", i, e.Key())
				break
			}
			set = append(set, tag.Tag{Name: e.Key(), Value: s})
		}
		opts = append(opts, readpref.WithTagSets(set))
	}
	if n := r.int64Ptr("maxStalenessSeconds"); n != nil {
		opts = append(opts, readpref.WithMaxStaleness(time.Duration(*n)*time.Second))
	}
	if h := r.doc("hedge"); h != nil {
		if v, err := h.LookupErr("enabled"); err == nil {
			if b, ok := v.BooleanOK(); ok {
				opts = append(opts, readpref.WithHedgeEnabled(b))
			}
		}
	}
	if err := r.done("field"); err != nil {
		return nil, err
	}
	return readpref.New(mode, opts...)
}

// concerns holds a collectionOrDatabaseOptions object.
type concerns struct {
	rc *readconcern.ReadConcern
	rp *readpref.ReadPref
	wc *writeconcern.WriteConcern
}

func parseConcerns(d bson.Raw, where string) (concerns, error) {
	var c concerns
	if d == nil {
		return c, nil
	}
	r := newFields(d, where)
	var err error
	if x := r.doc("readConcern"); x != nil {
		if c.rc, err = parseReadConcern(x, where+".readConcern"); err != nil {
			return c, err
		}
	}
	if x := r.doc("readPreference"); x != nil {
		if c.rp, err = parseReadPreference(x, where+".readPreference"); err != nil {
			return c, err
		}
	}
	if x := r.doc("writeConcern"); x != nil {
		if c.wc, err = parseWriteConcern(x, where+".writeConcern"); err != nil {
			return c, err
		}
	}
	if err := r.done("option"); err != nil {
		return c, fmt.Errorf("%w", err)
	}
	return c, nil
}
