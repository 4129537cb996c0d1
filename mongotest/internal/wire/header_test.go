package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// countingReader records how many bytes were read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadMessage(t *testing.T) {
	m1 := AppendMsg(nil, 1, 0, 0, mustDoc(t, bson.D{{Key: "ping", Value: int32(1)}}))
	m2 := handshakeQuery(t, false)
	r := bytes.NewReader(append(append([]byte(nil), m1...), m2...))
	for i, want := range [][]byte{m1, m2} {
		h, body, err := ReadMessage(r, 0)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if int(h.Length) != len(want) || !bytes.Equal(body, want[HeaderSize:]) {
			t.Errorf("message %d: header %+v, body %d bytes; want %d bytes", i, h, len(body), len(want))
		}
	}
	if _, _, err := ReadMessage(r, 0); err != io.EOF {
		t.Errorf("at end: err = %v, want io.EOF", err)
	}
}

func TestReadMessageRejects(t *testing.T) {
	hdr := func(length int32) []byte {
		return Header{Length: length, RequestID: 1, OpCode: OpMsg}.Append(nil)
	}
	big := append(hdr(1<<30), make([]byte, 64)...)
	tests := []struct {
		name    string
		in      []byte
		max     int
		want    error
		maxRead int // bytes ReadMessage may consume; 0 = no limit checked
	}{
		{"length below header", hdr(15), 0, ErrMalformed, 0},
		{"negative length", hdr(-1), 0, ErrMalformed, 0},
		{"too large", big, 1024, ErrTooLarge, HeaderSize},
		{"above default max", append(hdr(DefaultMaxMessageSize+1), make([]byte, 8)...), 0, ErrTooLarge, HeaderSize},
		{"truncated header", hdr(20)[:10], 0, io.ErrUnexpectedEOF, 0},
		{"truncated body", append(hdr(40), 1, 2, 3), 0, io.ErrUnexpectedEOF, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countingReader{r: bytes.NewReader(tc.in)}
			_, _, err := ReadMessage(cr, tc.max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.maxRead > 0 && cr.n > tc.maxRead {
				t.Errorf("read %d bytes of a rejected message, want at most %d", cr.n, tc.maxRead)
			}
		})
	}
}

func TestReadMessageExactlyMax(t *testing.T) {
	m := AppendMsg(nil, 1, 0, 0, mustDoc(t, bson.D{{Key: "ping", Value: int32(1)}}))
	if _, _, err := ReadMessage(bytes.NewReader(m), len(m)); err != nil {
		t.Errorf("message of exactly maxSize rejected: %v", err)
	}
	if _, _, err := ReadMessage(bytes.NewReader(m), len(m)-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("message one byte over maxSize: err = %v", err)
	}
}

func TestAppendReply(t *testing.T) {
	doc := mustDoc(t, bson.D{{Key: "ismaster", Value: true}, {Key: "ok", Value: 1.0}})
	out := AppendReply(nil, 3, 1, ReplyAwaitCapable, doc)
	h, b := splitMsg(t, out)
	if want := (Header{Length: int32(len(out)), RequestID: 3, ResponseTo: 1, OpCode: OpReply}); h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	if len(b) != 20+len(doc) {
		t.Fatalf("body %d bytes, want %d", len(b), 20+len(doc))
	}
	if f := int32(binary.LittleEndian.Uint32(b)); f != ReplyAwaitCapable {
		t.Errorf("responseFlags %d", f)
	}
	if c := binary.LittleEndian.Uint64(b[4:]); c != 0 {
		t.Errorf("cursorID %d", c)
	}
	if s := binary.LittleEndian.Uint32(b[12:]); s != 0 {
		t.Errorf("startingFrom %d", s)
	}
	if n := binary.LittleEndian.Uint32(b[16:]); n != 1 {
		t.Errorf("numberReturned %d", n)
	}
	if !bytes.Equal(b[20:], doc) {
		t.Errorf("document differs")
	}
}
