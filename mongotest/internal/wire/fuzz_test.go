package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzParse feeds arbitrary bytes through ReadMessage and every body parser.
// It checks that nothing panics, that every rejection is a classified *Error,
// and that every accepted message round-trips through the encoders.
func FuzzParse(f *testing.F) {
	f.Add(driverInsert(f, 3))
	f.Add(driverInsert(f, 0))
	f.Add(handshakeQuery(f, false))
	f.Add(handshakeQuery(f, true))
	f.Add(AppendMsg(nil, 1, 0, FlagExhaustAllowed, mustDoc(f, bson.D{{Key: "hello", Value: int32(1)}, {Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: bson.NewObjectID()}, {Key: "counter", Value: int64(0)}}}, {Key: "maxAwaitTimeMS", Value: int64(10000)}, {Key: "$db", Value: "admin"}})))
	f.Add(withChecksum(driverInsert(f, 2), false))
	ins := driverInsert(f, 2)
	f.Add(AppendCompressed(nil, 9, 0, OpMsg, ins[HeaderSize:]))
	f.Add(ins[:len(ins)-7])
	f.Add(ins[:HeaderSize+3])

	f.Fuzz(func(t *testing.T, data []byte) {
		h, body, err := ReadMessage(bytes.NewReader(data), 1<<20)
		if err != nil {
			return
		}
		msg := data[:h.Length]
		checkMsg(t, h, body)
		checkQuery(t, h, body)
		op, inner, err := ParseCompressed(body)
		if err != nil {
			checkErr(t, "ParseCompressed", err)
			return
		}
		if got := AppendCompressed(nil, h.RequestID, h.ResponseTo, op, inner); h.OpCode == OpCompressed && !bytes.Equal(got, msg) {
			t.Fatalf("OP_COMPRESSED round trip differs:\n got %x\nwant %x", got, msg)
		}
		ih := Header{Length: int32(HeaderSize + len(inner)), RequestID: h.RequestID, ResponseTo: h.ResponseTo, OpCode: op}
		switch op {
		case OpMsg:
			checkMsg(t, ih, inner)
		case OpQuery:
			checkQuery(t, ih, inner)
		}
	})
}

func checkErr(t *testing.T, what string, err error) {
	t.Helper()
	var we *Error
	if !errors.As(err, &we) || !(errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnsupported)) {
		t.Fatalf("%s: unclassified error %T: %v", what, err, err)
	}
}

// checkMsg parses body as an OP_MSG (whatever h.OpCode says) and, if it is
// accepted, checks Command and the re-encoding.
func checkMsg(t *testing.T, h Header, body []byte) {
	t.Helper()
	h.OpCode = OpMsg
	m, err := ParseMsg(h, body)
	if err != nil {
		checkErr(t, "ParseMsg", err)
		return
	}
	cmd, err := m.Command()
	if err != nil {
		if keys, _ := m.Body.Elements(); len(keys) == 0 && errors.Is(err, ErrMalformed) {
			return
		}
		t.Fatalf("Command failed on a message ParseMsg accepted: %v", err)
	}
	elems, err := m.Body.Elements()
	if err != nil {
		t.Fatalf("accepted body has unreadable elements: %v", err)
	}
	if len(cmd) != len(elems)+len(m.Sequences) {
		t.Fatalf("Command has %d fields, want %d body fields + %d sequences", len(cmd), len(elems), len(m.Sequences))
	}
	out := m.Append(nil, h.RequestID, h.ResponseTo)
	h2, err := ParseHeader(out)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := ParseMsg(h2, out[HeaderSize:])
	if err != nil {
		t.Fatalf("re-encoded message rejected: %v", err)
	}
	if !reflect.DeepEqual(m, m2) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", m2, m)
	}
	if len(m.Sequences) == 0 && !bytes.Equal(out[HeaderSize:], body) {
		t.Fatalf("single-section message re-encodes differently:\n got %x\nwant %x", out[HeaderSize:], body)
	}
}

// checkQuery parses body as an OP_QUERY and checks the re-encoding.
func checkQuery(t *testing.T, h Header, body []byte) {
	t.Helper()
	q, err := ParseQuery(body)
	if err != nil {
		checkErr(t, "ParseQuery", err)
		return
	}
	out := q.Append(nil, h.RequestID, h.ResponseTo)
	if !bytes.Equal(out[HeaderSize:], body) {
		t.Fatalf("OP_QUERY re-encoding differs:\n got %x\nwant %x", out[HeaderSize:], body)
	}
	if _, err := q.Command(); err != nil {
		checkErr(t, "Query.Command", err)
	}
}
