package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestParseQuery(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		msg := handshakeQuery(t, wrapped)
		h, b := splitMsg(t, msg)
		if h.OpCode != OpQuery || int(h.Length) != len(msg) {
			t.Fatalf("header %+v", h)
		}
		q, err := ParseQuery(b)
		if err != nil {
			t.Fatalf("wrapped=%v: %v", wrapped, err)
		}
		if q.FullCollectionName != "admin.$cmd" || q.NumberToReturn != -1 || q.NumberToSkip != 0 || q.ReturnFieldsSelector != nil {
			t.Errorf("wrapped=%v: parsed %+v", wrapped, q)
		}
		cmd, err := q.Command()
		if err != nil {
			t.Fatal(err)
		}
		if cmd[0].Key != "isMaster" || cmd[0].Value != int32(1) {
			t.Errorf("wrapped=%v: command %v", wrapped, cmd)
		}
		if _, ok := cmd[2].Value.(bson.D); !ok {
			t.Errorf("nested document decoded as %T, want bson.D", cmd[2].Value)
		}
		if _, ok := cmd[3].Value.(bson.A); !ok {
			t.Errorf("array decoded as %T, want bson.A", cmd[3].Value)
		}
		_, rp, err := UnwrapQuery(q.Query)
		if err != nil {
			t.Fatal(err)
		}
		if wrapped != (rp != nil) {
			t.Errorf("wrapped=%v: readPreference %v", wrapped, rp)
		}
		if got := q.Append(nil, h.RequestID, h.ResponseTo); !bytes.Equal(got, msg) {
			t.Errorf("wrapped=%v: re-encoding differs", wrapped)
		}
	}
}

func TestParseQuerySelector(t *testing.T) {
	q := Query{Flags: 4, FullCollectionName: "db.$cmd", NumberToSkip: 2, NumberToReturn: 1,
		Query: mustDoc(t, bson.D{{Key: "ping", Value: 1}}), ReturnFieldsSelector: mustDoc(t, bson.D{{Key: "a", Value: 1}})}
	_, b := splitMsg(t, q.Append(nil, 1, 0))
	got, err := ParseQuery(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, q) {
		t.Errorf("got %+v, want %+v", *got, q)
	}
}

func TestParseQueryInvalid(t *testing.T) {
	_, good := splitMsg(t, handshakeQuery(t, false))
	nameEnd := 4 + len("admin.$cmd") + 1
	notDoc := mustDoc(t, bson.D{{Key: "$query", Value: "x"}})
	bad := Query{FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: notDoc}
	_, badBody := splitMsg(t, bad.Append(nil, 1, 0))
	tests := map[string][]byte{
		"empty":              {},
		"truncated flags":    good[:3],
		"unterminated name":  good[:nameEnd-1],
		"truncated skip":     good[:nameEnd+2],
		"truncated return":   good[:nameEnd+6],
		"no query":           good[:nameEnd+8],
		"truncated query":    good[:len(good)-1],
		"trailing bytes":     append(append([]byte(nil), good...), 1, 2, 3),
		"bad selector":       append(append([]byte(nil), good...), 5, 0, 0, 0, 1),
		"query not document": nil, // filled below, fails in Command
	}
	for name, b := range tests {
		if name == "query not document" {
			q, err := ParseQuery(badBody)
			if err != nil {
				t.Fatalf("%s: ParseQuery: %v", name, err)
			}
			if _, err := q.Command(); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: Command err = %v", name, err)
			}
			continue
		}
		if _, err := ParseQuery(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestParseCompressed(t *testing.T) {
	inner := AppendMsg(nil, 4, 0, 0, mustDoc(t, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "d"}}))
	msg := AppendCompressed(nil, 4, 0, OpMsg, inner[HeaderSize:])
	h, b := splitMsg(t, msg)
	if h.OpCode != OpCompressed || int(h.Length) != len(msg) {
		t.Fatalf("header %+v", h)
	}
	op, in, err := ParseCompressed(b)
	if err != nil {
		t.Fatal(err)
	}
	if op != OpMsg || !bytes.Equal(in, inner[HeaderSize:]) {
		t.Fatalf("op %d inner %x", op, in)
	}
	m, err := ParseMsg(Header{Length: int32(HeaderSize + len(in)), RequestID: h.RequestID, OpCode: op}, in)
	if err != nil {
		t.Fatalf("inner message: %v", err)
	}
	if cmd, err := m.Command(); err != nil || cmd[0].Key != "find" {
		t.Errorf("inner command %v, %v", cmd, err)
	}

	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	tests := []struct {
		name string
		body []byte
		want error
	}{
		{"truncated opcode", b[:3], ErrMalformed},
		{"truncated size", b[:7], ErrMalformed},
		{"missing compressor id", b[:8], ErrMalformed},
		{"snappy", mutate(func(x []byte) []byte { x[8] = CompressorSnappy; return x }), ErrUnsupported},
		{"zstd", mutate(func(x []byte) []byte { x[8] = CompressorZstd; return x }), ErrUnsupported},
		{"size mismatch", mutate(func(x []byte) []byte { x[4]++; return x }), ErrMalformed},
		{"negative size", mutate(func(x []byte) []byte { x[7] = 0x80; return x }), ErrMalformed},
		{"payload short", b[:len(b)-1], ErrMalformed},
		{"nested", AppendCompressed(nil, 1, 0, OpCompressed, b)[HeaderSize:], ErrMalformed},
	}
	for _, tc := range tests {
		if _, _, err := ParseCompressed(tc.body); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}
