package extjson

import (
	"errors"
	"strings"
	"testing"
)

// A badCase is input the driver rejects. field is the path the error must
// name ("" for the outer document).
type badCase struct {
	name  string
	doc   []byte
	field string
}

func malformed() []badCase {
	b := func(bs ...byte) []byte { return bs }
	return []badCase{
		{"nil", nil, ""},
		{"three bytes", b(5, 0, 0), ""},
		{"length below 5", b(4, 0, 0, 0, 0), ""},
		{"negative length", cat(le32(-1), b(0)), ""},
		{"length past the bytes", b(6, 0, 0, 0, 0), ""},
		{"terminator missing", b(7, 0, 0, 0, 0x0A, 'a', 0), ""},
		{"terminator early", b(9, 0, 0, 0, 0x0A, 'a', 0, 0, 0), ""},
		{"key without NUL", b(7, 0, 0, 0, 0x0A, 'a', 'b'), "ab"},
		{"unknown type 0x14", doc(eRaw(0x14, "a", nil)), "a"},
		{"unknown type 0x80", doc(eRaw(0x80, "a", nil)), "a"},
		{"string length zero", doc(eRaw(0x02, "s", le32(0))), "s"},
		{"string length negative", doc(eRaw(0x02, "s", cat(le32(-5), []byte("ab\x00")))), "s"},
		{"string past its document", doc(eRaw(0x02, "s", cat(le32(100), []byte("ab\x00")))), "s"},
		{"string without NUL", doc(eRaw(0x02, "s", cat(le32(2), []byte("ab"))), eNull("n")), "s"},
		{"code without NUL", doc(eRaw(0x0D, "c", cat(le32(2), []byte("ab"))), eNull("n")), "c"},
		{"symbol length zero", doc(eRaw(0x0E, "y", le32(0))), "y"},
		{"document length 4", doc(eRaw(0x03, "d", le32(4))), "d"},
		{"document past its parent", doc(eRaw(0x03, "d", cat(le32(50), b(0)))), "d"},
		{"document terminator early", doc(eRaw(0x03, "d", b(6, 0, 0, 0, 0, 0))), "d"},
		{"array terminator missing", doc(eRaw(0x04, "a", b(12, 0, 0, 0, 0x0A, '0', 0, 0x0A, '1', 0, 0x0A, '2')), eNull("n")), "a.2"},
		{"array element unknown type", doc(eArray("a", arr(eRaw(0x20, "", nil)))), "a.0"},
		{"boolean 2", doc(eRaw(0x08, "b", b(2))), "b"},
		{"boolean truncated", cat(le32(7), b(0x08, 'b', 0)), "b"},
		{"double truncated", doc(eRaw(0x01, "d", make([]byte, 6))), "d"},
		{"ObjectId truncated", doc(eRaw(0x07, "o", make([]byte, 10))), "o"},
		{"int32 truncated", doc(eRaw(0x10, "i", make([]byte, 2))), "i"},
		{"int64 truncated", doc(eRaw(0x12, "l", make([]byte, 6))), "l"},
		{"date truncated", doc(eRaw(0x09, "t", make([]byte, 6))), "t"},
		{"timestamp truncated", doc(eRaw(0x11, "ts", make([]byte, 6))), "ts"},
		{"decimal truncated", doc(eRaw(0x13, "n", make([]byte, 14))), "n"},
		{"regex options unterminated", doc(eRaw(0x0B, "r", []byte("abc"))), "r"},
		{"regex pattern unterminated", cat(le32(9), b(0x0B, 'r', 0, 'a', 'b')), "r"},
		{"code with scope total mismatch", doc(eRaw(0x0F, "w", cat(le32(999), bstr("f"), doc()))), "w"},
		{"code with scope code length zero", doc(eRaw(0x0F, "w", cat(le32(13), le32(0), doc()))), "w"},
		{"code with scope scope length 4", doc(eRaw(0x0F, "w", cat(le32(14), bstr("f"), le32(4)))), "w"},
		{"code with scope scope past its parent", doc(eRaw(0x0F, "w", cat(le32(4+6+40), bstr("f"), le32(40), b(0)))), "w"},
		{"code with scope short", doc(eRaw(0x0F, "w", le32(13))), "w"},
		{"binary negative length", doc(eRaw(0x05, "b", cat(le32(-1), b(0)))), "b"},
		{"binary past its document", doc(eRaw(0x05, "b", cat(le32(100), b(0), []byte("abc")))), "b"},
		{"binary without subtype", cat(le32(11), b(0x05, 'b', 0), le32(0)), "b"},
		{"old binary inner length negative", doc(eRaw(0x05, "b", cat(le32(8), b(2), le32(-1), []byte("abcd")))), "b"},
		{"old binary inner length past its outer", doc(eRaw(0x05, "b", cat(le32(6), b(2), le32(5), []byte("ab")))), "b"},
		{"nested old binary inner length past its document", doc(eDoc("d", doc(eRaw(0x05, "b", cat(le32(6), b(2), le32(50), []byte("ab")))))), "d.b"},
		{"nested old binary inner length negative", doc(eDoc("d", doc(eRaw(0x05, "b", cat(le32(6), b(2), le32(-2), []byte("ab")))))), "d.b"},
		{"DBPointer without its ObjectId", doc(eRaw(0x0C, "p", cat(bstr("ns"), []byte("short")))), "p"},
		{"DBPointer namespace length zero", doc(eRaw(0x0C, "p", cat(le32(0), oidBytes(oid)))), "p"},
		{"deep in an array", doc(eArray("a", arr(eNull(""), eDoc("", doc(eRaw(0x08, "b", b(7))))))), "a.1.b"},
		{"in a scope", doc(eCWS("w", "f", doc(eRaw(0x08, "x", b(9))))), "w.$scope.x"},
	}
}

// TestMalformed checks that input the driver rejects is rejected with an
// error matching ErrMalformed that names the field, and nothing panics.
func TestMalformed(t *testing.T) {
	for _, c := range malformed() {
		t.Run(c.name, func(t *testing.T) {
			for _, canonical := range []bool{false, true} {
				if out, err := driver(c.doc, canonical); err == nil {
					t.Fatalf("canonical=%v: the driver accepts the case: %s", canonical, out)
				}
				out, err := Marshal(c.doc, canonical)
				if err == nil {
					t.Fatalf("canonical=%v: Marshal = %s, want an error", canonical, out)
				}
				if out != nil {
					t.Errorf("canonical=%v: Marshal returned output with its error: %q", canonical, out)
				}
				if !errors.Is(err, ErrMalformed) {
					t.Errorf("canonical=%v: %v does not match ErrMalformed", canonical, err)
				}
				var me *MalformedError
				if !errors.As(err, &me) {
					t.Fatalf("canonical=%v: %T is not a *MalformedError", canonical, err)
				}
				if me.Field != c.field {
					t.Errorf("canonical=%v: error names field %q, want %q (%v)", canonical, me.Field, c.field, err)
				}
				if me.Offset < 0 || me.Offset > len(c.doc) {
					t.Errorf("canonical=%v: offset %d outside the %d-byte input", canonical, me.Offset, len(c.doc))
				}
				if c.field != "" && !strings.Contains(err.Error(), `field "`+c.field+`"`) {
					t.Errorf("canonical=%v: message %q does not name the field", canonical, err)
				}
			}
		})
	}
}

// TestErrorMessage pins the shape of one message.
func TestErrorMessage(t *testing.T) {
	_, err := Marshal(doc(eDoc("fullDocument", doc(eRaw(0x02, "name", cat(le32(100), []byte("ab\x00")))))), false)
	want := `extjson: malformed BSON at byte 28, field "fullDocument.name": string length 100 runs past the end of its document (4 bytes left)`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

// lenient holds input the driver accepts although it is not well-formed
// BSON, with the rendering it gets.
func lenient() []corpusCase {
	b := func(bs ...byte) []byte { return bs }
	abc := `{"$binary":{"base64":"YWJj","subType":"02"}}`
	return []corpusCase{
		modes("bytes after the document", cat(doc(eInt32("a", 1)), []byte("junk")), `{"a":1}`, `{"a":{"$numberInt":"1"}}`),
		same("string holding NUL", doc(eString("s", "a\x00b")), `{"s":"a\u0000b"}`),
		modes("array keys not indexes", doc(eArray("a", doc(eInt32("x", 1), eInt32("x\xff", 2)))), `{"a":[1,2]}`,
			`{"a":[{"$numberInt":"1"},{"$numberInt":"2"}]}`),
		same("code with scope code not NUL-terminated", doc(eRaw(0x0F, "w", cat(le32(16), le32(3), []byte("abX"), doc()))),
			`{"w":{"$code":"ab","$scope":{}}}`),
		same("old binary with padding after its inner data", doc(eRaw(0x05, "b", cat(le32(10), b(2), le32(3), []byte("abcxyz"))), eNull("n")),
			`{"b":`+abc+`,"n":null}`),
		same("nested old binary ignores its outer length", doc(eDoc("d", doc(eRaw(0x05, "b", cat(le32(1000), b(2), le32(3), []byte("abc"))), eNull("n")))),
			`{"d":{"b":`+abc+`,"n":null}}`),
		same("old binary of outer length 3 has no inner length", doc(eRaw(0x05, "b", cat(le32(3), b(2), []byte("abc")))),
			`{"b":`+abc+`}`),
		same("nested old binary of outer length 3", doc(eArray("a", arr(eRaw(0x05, "", cat(le32(3), b(2), []byte("abc")))))),
			`{"a":[`+abc+`]}`),
	}
}

// TestLenient checks the driver's leniencies are kept: same output.
func TestLenient(t *testing.T) {
	for _, c := range lenient() {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range []struct {
				canonical bool
				want      string
			}{{false, c.relaxed}, {true, c.canonical}} {
				drv, err := driver(c.doc, m.canonical)
				if err != nil || string(drv) != m.want {
					t.Errorf("canonical=%v: the driver renders %s, %v; the case says %s", m.canonical, drv, err, m.want)
				}
				got, err := Marshal(c.doc, m.canonical)
				if err != nil || string(got) != m.want {
					t.Errorf("canonical=%v: Marshal = %s, %v; want %s", m.canonical, got, err, m.want)
				}
			}
		})
	}
}
