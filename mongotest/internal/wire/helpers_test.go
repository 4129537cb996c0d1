package wire

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// mustDoc marshals v or fails the test.
func mustDoc(t testing.TB, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// rawMsg assembles an OP_MSG from raw section bytes, patching the length.
func rawMsg(requestID int32, flags uint32, sections ...[]byte) []byte {
	b := Header{RequestID: requestID, OpCode: OpMsg}.Append(nil)
	b = binary.LittleEndian.AppendUint32(b, flags)
	for _, s := range sections {
		b = append(b, s...)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func kind0(doc []byte) []byte { return append([]byte{0}, doc...) }

// kind1 builds a kind-1 section with a correct size.
func kind1(id string, docs ...[]byte) []byte {
	b := []byte{1, 0, 0, 0, 0}
	b = append(b, id...)
	b = append(b, 0)
	for _, d := range docs {
		b = append(b, d...)
	}
	binary.LittleEndian.PutUint32(b[1:], uint32(len(b)-1))
	return b
}

// withChecksum sets the checksum flag on a complete OP_MSG and appends a
// CRC-32C (correct, or corrupted when bad is true).
func withChecksum(msg []byte, bad bool) []byte {
	b := append([]byte(nil), msg...)
	binary.LittleEndian.PutUint32(b[16:], binary.LittleEndian.Uint32(b[16:])|FlagChecksumPresent)
	binary.LittleEndian.PutUint32(b, uint32(len(b)+4))
	sum := crc32c(b)
	if bad {
		sum ^= 1
	}
	return binary.LittleEndian.AppendUint32(b, sum)
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// splitMsg splits a complete message into header and body.
func splitMsg(t testing.TB, b []byte) (Header, []byte) {
	t.Helper()
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h, b[HeaderSize:]
}

// driverInsert is an insert shaped like the Go driver's: body first, then a
// "documents" sequence.
func driverInsert(t testing.TB, n int) []byte {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "coll"}, {Key: "ordered", Value: true}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}}, {Key: "$db", Value: "test"}})
	var docs [][]byte
	for i := range n {
		docs = append(docs, mustDoc(t, bson.D{{Key: "_id", Value: int32(i)}, {Key: "x", Value: "value"}}))
	}
	return rawMsg(7, 0, kind0(body), kind1("documents", docs...))
}

func handshakeQuery(t testing.TB, wrapped bool) []byte {
	cmd := bson.D{{Key: "isMaster", Value: int32(1)}, {Key: "helloOk", Value: true}, {Key: "client", Value: bson.D{{Key: "driver", Value: bson.D{{Key: "name", Value: "mongo-go-driver"}}}}}, {Key: "compression", Value: bson.A{}}}
	var q bson.D = cmd
	if wrapped {
		q = bson.D{{Key: "$query", Value: cmd}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondaryPreferred"}}}}
	}
	qq := Query{FullCollectionName: "admin.$cmd", NumberToReturn: -1, Query: mustDoc(t, q)}
	return qq.Append(nil, 1, 0)
}
