package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Lookup returns the value at a dotted path. Numeric components index into
// arrays; there is no implicit traversal of arrays. The second result is
// false when the path does not resolve.
func Lookup(doc bson.D, path string) (any, bool) {
	var cur any = doc
	for _, part := range strings.Split(path, ".") {
		switch c := shallow(cur).(type) {
		case bson.D:
			v, ok := getField(c, part)
			if !ok {
				return nil, false
			}
			cur = v
		case bson.A:
			i, ok := arrayIndex(part)
			if !ok || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return shallow(cur), true
}

// getField returns the first field named name.
func getField(d bson.D, name string) (any, bool) {
	for i := range d {
		if d[i].Key == name {
			return d[i].Value, true
		}
	}
	return nil, false
}

func fieldIndex(d bson.D, name string) int {
	for i := range d {
		if d[i].Key == name {
			return i
		}
	}
	return -1
}

// arrayIndex parses a path component as an array index: decimal digits
// only, no sign.
func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		if len(s) > 9 && allDigits(s) {
			return 1 << 30, true // too large to exist; still an index
		}
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func splitPath(p string) []string { return strings.Split(p, ".") }

// shallow is a cheap normalize for hot paths: canonical values (everything
// bson.Unmarshal produces, documents and arrays included) are returned as
// they are without scanning their contents; other Go types go through
// normalize.
func shallow(v any) any {
	switch v.(type) {
	case nil, int32, int64, float64, string, bool, bson.D, bson.A, bson.ObjectID,
		bson.DateTime, bson.Timestamp, bson.Binary, bson.Regex, bson.Decimal128,
		bson.MinKey, bson.MaxKey, bson.Undefined, bson.Symbol, missingT:
		return v
	}
	return normalize(v)
}
