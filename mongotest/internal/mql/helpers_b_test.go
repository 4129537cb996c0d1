package mql

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// docB parses relaxed extended JSON into a bson.D.
func docB(t testing.TB, s string) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return d
}

// valB parses one extended-JSON value.
func valB(t testing.TB, s string) any {
	t.Helper()
	return docB(t, `{"v": `+s+`}`)[0].Value
}

// jsonB renders a value as canonical extended JSON for messages.
func jsonB(v any) string {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, true, false)
	if err != nil {
		return describe(v)
	}
	return string(b)
}

// sameB fails unless got and want are identical BSON (types included).
func sameB(t testing.TB, what string, got, want any) {
	t.Helper()
	if !identical(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, jsonB(got), jsonB(want))
	}
}

// codeB fails unless err is an *Error with the given code.
func codeB(t testing.TB, what string, err error, code int32) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("%s: got error %v, want code %d", what, err, code)
		return
	}
	if e.Code != code {
		t.Errorf("%s: got code %d (%s), want %d", what, e.Code, e.Msg, code)
	}
}

// arrB parses an extended-JSON array.
func arrB(t testing.TB, s string) bson.A {
	t.Helper()
	a, ok := valB(t, s).(bson.A)
	if !ok {
		t.Fatalf("not an array: %s", s)
	}
	return a
}
