package extjson

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// driver renders doc with the driver's marshaller, the reference. A panic
// in the driver counts as its failing.
func driver(doc []byte, canonical bool) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("driver panicked: %v", r)
		}
	}()
	return bson.MarshalExtJSON(bson.Raw(doc), canonical, false)
}

// compare fails t unless Marshal and Append agree with the driver on doc
// in both modes: both fail (this package with ErrMalformed, leaving dst
// as it was), or both return the same bytes.
func compare(t *testing.T, doc []byte) {
	t.Helper()
	for _, canonical := range []bool{false, true} {
		want, derr := driver(doc, canonical)
		got, err := Marshal(doc, canonical)
		prefix := []byte("prefix,")
		app, aerr := Append(bytes.Clone(prefix), doc, canonical)
		switch {
		case derr != nil && err != nil:
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("canonical=%v: error %v does not match ErrMalformed", canonical, err)
			}
			if aerr == nil || !bytes.Equal(app, prefix) {
				t.Errorf("canonical=%v: Append on malformed input = %q, %v; want the prefix back and an error", canonical, app, aerr)
			}
		case derr != nil:
			t.Errorf("canonical=%v: driver fails (%v) but Marshal returns %q\ninput %x", canonical, derr, got, doc)
		case err != nil:
			t.Errorf("canonical=%v: driver returns %q but Marshal fails: %v\ninput %x", canonical, want, err, doc)
		case !bytes.Equal(got, want):
			t.Errorf("canonical=%v: output differs from the driver's\n got %q\nwant %q\ninput %x", canonical, got, want, doc)
		case aerr != nil || !bytes.Equal(app, append(prefix, want...)):
			t.Errorf("canonical=%v: Append = %q, %v; want the prefix then %q", canonical, app, aerr, want)
		}
	}
}

// FuzzExtJSON feeds arbitrary bytes, and a document generated from the
// same bytes (every BSON type, nested, with edge-case values), to the
// driver and to this package: both must fail, or both must return the
// same bytes. The seed corpus is the table of corpus_test.go plus the
// malformed and lenient inputs, so plain go test runs it.
func FuzzExtJSON(f *testing.F) {
	for _, c := range corpus() {
		f.Add(c.doc)
	}
	for _, c := range malformed() {
		f.Add(c.doc)
	}
	for _, c := range lenient() {
		f.Add(c.doc)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		compare(t, data)
		compare(t, generate(data))
	})
}
