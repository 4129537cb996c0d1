package unified

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// fields reads the keys of one document of a test file (or of an
// operation's arguments) with type checks, remembering which keys were read
// so that done can report every key the runner does not understand. The
// first problem is kept; later reads return zero values.
type fields struct {
	raw   bson.Raw
	where string
	seen  map[string]bool
	err   error
}

func newFields(doc bson.Raw, where string) *fields {
	return &fields{raw: doc, where: where, seen: map[string]bool{}}
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%s: %s", f.where, fmt.Sprintf(format, args...))
	}
}

// value returns the raw value of key and whether it is present.
func (f *fields) value(key string) (bson.RawValue, bool) {
	f.seen[key] = true
	if f.raw == nil {
		return bson.RawValue{}, false
	}
	v, err := f.raw.LookupErr(key)
	if err != nil {
		return bson.RawValue{}, false
	}
	return v, true
}

func (f *fields) has(key string) bool {
	_, ok := f.value(key)
	return ok
}

func (f *fields) str(key string) string {
	v, ok := f.value(key)
	if !ok {
		return ""
	}
	s, ok := v.StringValueOK()
	if !ok {
		f.fail("%s must be a string, not %s", key, v.Type)
	}
	return s
}

func (f *fields) reqStr(key string) string {
	if _, ok := f.value(key); !ok {
		f.fail("%s is required", key)
		return ""
	}
	return f.str(key)
}

func (f *fields) boolPtr(key string) *bool {
	v, ok := f.value(key)
	if !ok {
		return nil
	}
	b, ok := v.BooleanOK()
	if !ok {
		f.fail("%s must be a boolean, not %s", key, v.Type)
		return nil
	}
	return &b
}

func (f *fields) boolean(key string) bool {
	p := f.boolPtr(key)
	return p != nil && *p
}

// int64Ptr accepts any integral number (int32, int64 or a whole double).
func (f *fields) int64Ptr(key string) *int64 {
	v, ok := f.value(key)
	if !ok {
		return nil
	}
	n, ok := asInt64(v)
	if !ok {
		f.fail("%s must be an integer, not %s", key, v.Type)
		return nil
	}
	return &n
}

func (f *fields) doc(key string) bson.Raw {
	v, ok := f.value(key)
	if !ok {
		return nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		f.fail("%s must be a document, not %s", key, v.Type)
	}
	return d
}

func (f *fields) reqDoc(key string) bson.Raw {
	if _, ok := f.value(key); !ok {
		f.fail("%s is required", key)
		return nil
	}
	return f.doc(key)
}

// array returns the elements of an array-valued key.
func (f *fields) array(key string) []bson.RawValue {
	v, ok := f.value(key)
	if !ok {
		return nil
	}
	a, ok := v.ArrayOK()
	if !ok {
		f.fail("%s must be an array, not %s", key, v.Type)
		return nil
	}
	vals, err := a.Values()
	if err != nil {
		f.fail("%s: %v", key, err)
		return nil
	}
	return vals
}

// docs returns the elements of an array of documents.
func (f *fields) docs(key string) []bson.Raw {
	var out []bson.Raw
	for i, v := range f.array(key) {
		d, ok := v.DocumentOK()
		if !ok {
			f.fail("%s[%d] must be a document, not %s", key, i, v.Type)
			return nil
		}
		out = append(out, d)
	}
	return out
}

func (f *fields) strings(key string) []string {
	var out []string
	for i, v := range f.array(key) {
		s, ok := v.StringValueOK()
		if !ok {
			f.fail("%s[%d] must be a string, not %s", key, i, v.Type)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// unknown lists the keys of the document that were never read, in order.
func (f *fields) unknown() []string {
	var out []string
	elems, err := f.raw.Elements()
	if err != nil {
		return nil
	}
	for _, e := range elems {
		if !f.seen[e.Key()] {
			out = append(out, e.Key())
		}
	}
	return out
}

// done returns the first problem met while reading, or an error naming the
// keys that were never read (what names those keys is given by kind, e.g.
// "argument" or "field").
func (f *fields) done(kind string) error {
	if f.err != nil {
		return f.err
	}
	if u := f.unknown(); len(u) > 0 {
		return fmt.Errorf("unified runner: %s: %s %s not supported", f.where, kind, strings.Join(u, ", "))
	}
	return nil
}

// asInt64 converts an integral BSON number to int64.
func asInt64(v bson.RawValue) (int64, bool) {
	if n, ok := v.Int32OK(); ok {
		return int64(n), true
	}
	if n, ok := v.Int64OK(); ok {
		return n, true
	}
	if d, ok := v.DoubleOK(); ok && d == float64(int64(d)) {
		return int64(d), true
	}
	return 0, false
}

// ready is done("argument") as a runner fault; handlers call it after
// reading their arguments and before calling the driver, so that an
// unsupported argument stops the operation before it runs.
func (f *fields) ready() error {
	if err := f.done("argument"); err != nil {
		return asRunnerError(err)
	}
	return nil
}
