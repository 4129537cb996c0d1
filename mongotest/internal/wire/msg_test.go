package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestParseMsgValid(t *testing.T) {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}})
	d1 := mustDoc(t, bson.D{{Key: "_id", Value: int32(1)}, {Key: "n", Value: bson.D{{Key: "a", Value: bson.A{int32(1), "x"}}}}})
	d2 := mustDoc(t, bson.D{{Key: "_id", Value: int32(2)}})
	wantDocs := bson.A{
		bson.D{{Key: "_id", Value: int32(1)}, {Key: "n", Value: bson.D{{Key: "a", Value: bson.A{int32(1), "x"}}}}},
		bson.D{{Key: "_id", Value: int32(2)}},
	}
	tests := []struct {
		name      string
		msg       []byte
		wantFlags uint32
		wantCmd   bson.D
	}{
		{"body only", rawMsg(1, 0, kind0(body)), 0,
			bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}}},
		{"body then sequence", rawMsg(1, 0, kind0(body), kind1("documents", d1, d2)), 0,
			bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}, {Key: "documents", Value: wantDocs}}},
		{"sequence then body", rawMsg(1, 0, kind1("documents", d1, d2), kind0(body)), 0,
			bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}, {Key: "documents", Value: wantDocs}}},
		{"empty sequence", rawMsg(1, 0, kind0(body), kind1("documents")), 0,
			bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}, {Key: "documents", Value: bson.A{}}}},
		{"two sequences", rawMsg(1, 0, kind1("ops", d1), kind0(body), kind1("nsInfo", d2)), 0,
			bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}, {Key: "ops", Value: wantDocs[:1]}, {Key: "nsInfo", Value: wantDocs[1:]}}},
		{"moreToCome", rawMsg(1, FlagMoreToCome, kind0(body)), FlagMoreToCome,
			bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}}},
		{"exhaustAllowed and unknown optional bit", rawMsg(1, FlagExhaustAllowed|1<<20, kind0(body)), FlagExhaustAllowed | 1<<20,
			bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}}},
		{"valid checksum", withChecksum(rawMsg(1, 0, kind0(body), kind1("documents", d1, d2)), false), FlagChecksumPresent,
			bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}, {Key: "documents", Value: wantDocs}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, b := splitMsg(t, tc.msg)
			m, err := ParseMsg(h, b)
			if err != nil {
				t.Fatalf("ParseMsg: %v", err)
			}
			if m.Flags != tc.wantFlags {
				t.Errorf("flags = %#x, want %#x", m.Flags, tc.wantFlags)
			}
			cmd, err := m.Command()
			if err != nil {
				t.Fatalf("Command: %v", err)
			}
			if !reflect.DeepEqual(cmd, tc.wantCmd) {
				t.Errorf("Command =\n %v\nwant\n %v", cmd, tc.wantCmd)
			}
			// Re-encoding gives a message that parses to the same Msg.
			h2, b2 := splitMsg(t, m.Append(nil, h.RequestID, h.ResponseTo))
			m2, err := ParseMsg(h2, b2)
			if err != nil {
				t.Fatalf("re-parse: %v", err)
			}
			if !reflect.DeepEqual(m, m2) {
				t.Errorf("round trip: %+v != %+v", m2, m)
			}
		})
	}
}

func TestParseMsgInvalid(t *testing.T) {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}})
	doc := mustDoc(t, bson.D{{Key: "_id", Value: int32(1)}})
	badType := append([]byte(nil), doc...)
	badType[4] = 0x42 // unknown element type
	nestedBad := mustDoc(t, bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}}}})
	nestedBad[4+2+4] = 0x42 // type byte of "b" inside "a"
	badBool := mustDoc(t, bson.D{{Key: "b", Value: true}})
	badBool[len(badBool)-2] = 2
	longPrefix := append([]byte(nil), body...)
	binary.LittleEndian.PutUint32(longPrefix, uint32(len(body)+10))
	negPrefix := append([]byte(nil), body...)
	binary.LittleEndian.PutUint32(negPrefix, 0xFFFFFFFF)

	seqSize := func(size int32) []byte {
		s := kind1("documents", doc)
		binary.LittleEndian.PutUint32(s[1:], uint32(size))
		return s
	}
	tests := []struct {
		name     string
		msg      []byte
		wantCode int32
	}{
		{"unknown required flag", rawMsg(1, 1<<4, kind0(body)), CodeIllegalOpMsgFlag},
		{"bad checksum", withChecksum(rawMsg(1, 0, kind0(body)), true), 0},
		{"checksum flag without room", rawMsg(1, FlagChecksumPresent, []byte{1, 2, 3, 4}), CodeChecksumMessageTooSmall},
		{"no sections", rawMsg(1, 0), CodeMissingBody},
		{"only a sequence", rawMsg(1, 0, kind1("documents", doc)), CodeMissingBody},
		{"two bodies", rawMsg(1, 0, kind0(body), kind0(body)), CodeMultipleBodySections},
		{"section kind 2", rawMsg(1, 0, kind0(body), []byte{2}, doc), CodeUnknownSectionKind},
		{"section kind 7", rawMsg(1, 0, []byte{7}, kind0(body)), CodeUnknownSectionKind},
		{"duplicate identifier", rawMsg(1, 0, kind0(body), kind1("documents", doc), kind1("documents", doc)), CodeDuplicateDocumentSequence},
		{"identifier in body", rawMsg(1, 0, kind0(body), kind1("insert", doc)), CodeDuplicateBodyField},
		{"empty identifier", rawMsg(1, 0, kind0(body), kind1("", doc)), 0},
		{"sequence size too large", rawMsg(1, 0, kind0(body), seqSize(1000)), 0},
		{"sequence size too small", rawMsg(1, 0, kind0(body), seqSize(4)), 0},
		{"sequence size negative", rawMsg(1, 0, kind0(body), seqSize(-1)), 0},
		{"sequence size cuts a document", rawMsg(1, 0, kind0(body), seqSize(int32(4+len("documents")+1+len(doc)-1)), []byte{0}), 0},
		{"identifier without NUL", rawMsg(1, 0, kind0(body), []byte{1, 7, 0, 0, 0, 'a', 'b', 'c'}), 0},
		{"truncated sequence size", rawMsg(1, 0, kind0(body), []byte{1, 7, 0}), 0},
		{"body length prefix too long", rawMsg(1, 0, kind0(longPrefix)), 0},
		{"body length prefix negative", rawMsg(1, 0, kind0(negPrefix)), 0},
		{"body truncated", rawMsg(1, 0, kind0(body[:len(body)-1])), 0},
		{"body shorter than 5", rawMsg(1, 0, []byte{0, 5, 0, 0, 0}), 0},
		{"body unknown type", rawMsg(1, 0, kind0(badType)), 0},
		{"nested document invalid", rawMsg(1, 0, kind0(nestedBad)), 0},
		{"bool not 0/1", rawMsg(1, 0, kind0(badBool)), 0},
		{"sequence document invalid", rawMsg(1, 0, kind0(body), kind1("documents", badType)), 0},
		{"trailing zero byte reads as a second body", rawMsg(1, 0, kind0(body), []byte{0}), CodeMultipleBodySections},
		{"truncated body after sequence", rawMsg(1, 0, kind1("documents", doc), []byte{0, 9, 0}), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, b := splitMsg(t, tc.msg)
			m, err := ParseMsg(h, b)
			if err == nil {
				t.Fatalf("ParseMsg accepted it: %+v", m)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("error %T is not *Error", err)
			}
			if we.Code != tc.wantCode {
				t.Errorf("code = %d, want %d (%v)", we.Code, tc.wantCode, err)
			}
		})
	}
}

func TestParseMsgHeaderChecks(t *testing.T) {
	msg := rawMsg(1, 0, kind0(mustDoc(t, bson.D{{Key: "ping", Value: int32(1)}})))
	h, b := splitMsg(t, msg)
	for name, fn := range map[string]func() (*Msg, error){
		"wrong opcode":    func() (*Msg, error) { h2 := h; h2.OpCode = OpQuery; return ParseMsg(h2, b) },
		"length mismatch": func() (*Msg, error) { h2 := h; h2.Length++; return ParseMsg(h2, b) },
		"short body":      func() (*Msg, error) { return ParseMsg(Header{Length: 19, OpCode: OpMsg}, []byte{0, 0, 0}) },
	} {
		if _, err := fn(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestCommandEmptyBody(t *testing.T) {
	h, b := splitMsg(t, rawMsg(1, 0, kind0(mustDoc(t, bson.D{}))))
	m, err := ParseMsg(h, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Command(); !errors.Is(err, ErrMalformed) {
		t.Errorf("Command on {} = %v, want ErrMalformed", err)
	}
}

func TestAppendMsg(t *testing.T) {
	doc := mustDoc(t, bson.D{{Key: "ok", Value: 1.0}})
	out := AppendMsg([]byte("prefix"), 5, 9, 0, doc)
	if string(out[:6]) != "prefix" {
		t.Fatalf("prefix clobbered")
	}
	h, b := splitMsg(t, out[6:])
	if want := (Header{Length: int32(16 + 4 + 1 + len(doc)), RequestID: 5, ResponseTo: 9, OpCode: OpMsg}); h != want {
		t.Errorf("header = %+v, want %+v", h, want)
	}
	m, err := ParseMsg(h, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Flags != 0 || string(m.Body) != string(doc) || len(m.Sequences) != 0 {
		t.Errorf("parsed %+v", m)
	}
	// With a checksum the message still parses, and the checksum is checked.
	cs := AppendMsg(nil, 5, 9, FlagChecksumPresent, doc)
	h, b = splitMsg(t, cs)
	if _, err := ParseMsg(h, b); err != nil {
		t.Errorf("checksummed AppendMsg does not parse: %v", err)
	}
	cs[len(cs)-5] ^= 0xFF
	if _, err := ParseMsg(h, b); !errors.Is(err, ErrMalformed) {
		t.Errorf("corrupted checksummed message parsed: %v", err)
	}
}

func BenchmarkParseMsgCommand1KiB(b *testing.B) {
	body := mustDoc(b, bson.D{{Key: "insert", Value: "coll"}, {Key: "ordered", Value: true}, {Key: "$db", Value: "test"}})
	doc := mustDoc(b, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "payload", Value: string(make([]byte, 950))}, {Key: "n", Value: int64(42)}})
	msg := rawMsg(1, 0, kind0(body), kind1("documents", doc))
	h, bb := splitMsg(b, msg)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := ParseMsg(h, bb)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Command(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCommandSequenceDocsShareTheirOwnBytes: a sequence document is
// decoded from bytes of its own, which replace it in the message's
// sequence and which its keys and strings share (an inserted document is
// stored once, with those bytes as its encoding); nothing decoded shares
// the message's bytes, and it decodes as bson.Unmarshal does.
func TestCommandSequenceDocsShareTheirOwnBytes(t *testing.T) {
	docs := []bson.Raw{
		mustDoc(t, bson.D{{Key: "_id", Value: int64(1)}, {Key: "name", Value: "first"}, {Key: "sub", Value: bson.D{{Key: "tag", Value: "inner"}}},
			{Key: "list", Value: bson.A{"x", int32(2)}}}),
		mustDoc(t, bson.D{{Key: "_id", Value: int64(2)}, {Key: "empty", Value: ""}, {Key: "bin", Value: bson.Binary{Data: []byte{1, 2}}}}),
	}
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}})
	msg := (&Msg{Body: body, Sequences: []Section1{{Identifier: "documents", Documents: docs}}}).Append(nil, 1, 0)
	h, b := splitMsg(t, msg)
	m, err := ParseMsg(h, b)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := m.Command()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := cmd[len(cmd)-1].Value.(bson.A)
	if len(got) != len(docs) {
		t.Fatalf("the sequence decoded as %v", cmd[len(cmd)-1])
	}
	for i := range b {
		b[i] = 0xee // what was decoded keeps nothing of the message
	}
	within := func(s string, own []byte) bool {
		if s == "" {
			return true
		}
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(&own[0]))
		return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(own))
	}
	for i, v := range got {
		own := m.Sequences[0].Documents[i]
		if !bytes.Equal(own, docs[i]) || &own[0] == &b[0] {
			t.Fatalf("document %d: the sequence holds %x, want a copy of %x", i, own, docs[i])
		}
		var want bson.D
		if err := bson.Unmarshal(docs[i], &want); err != nil {
			t.Fatal(err)
		}
		d, _ := v.(bson.D)
		if !sameValue(d, want) {
			t.Errorf("document %d decoded as %#v, want %#v", i, d, want)
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case bson.D:
				for _, e := range x {
					if !within(e.Key, own) {
						t.Errorf("document %d: key %q is a copy, not its document's bytes", i, e.Key)
					}
					walk(e.Value)
				}
			case bson.A:
				for _, e := range x {
					walk(e)
				}
			case string:
				if !within(x, own) {
					t.Errorf("document %d: string %q is a copy, not its document's bytes", i, x)
				}
			case bson.Binary:
				if within(string(x.Data), own) {
					t.Errorf("document %d: binary data shares the document's bytes (it is mutable)", i)
				}
			}
		}
		walk(d)
	}
}
