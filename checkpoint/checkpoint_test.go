package checkpoint

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestCheckSave(t *testing.T) {
	cp := Checkpoint{Stream: "s", Partition: 1, Version: 3, Epoch: 5}
	for _, tc := range []struct {
		name           string
		stored         Checkpoint
		ok, epochLost  bool
		messageMention string
	}{
		{"same version and epoch", Checkpoint{Version: 3, Epoch: 5}, true, false, ""},
		{"lower stored epoch", Checkpoint{Version: 3, Epoch: 4}, true, false, ""},
		{"newer version", Checkpoint{Version: 4, Epoch: 5}, false, false, "stored version 4, expected 3"},
		{"higher epoch", Checkpoint{Version: 3, Epoch: 6}, false, true, "stored epoch 6 > writer epoch 5"},
		{"nothing stored", Checkpoint{}, false, false, "nothing is stored"},
	} {
		err := CheckSave(cp, tc.stored)
		if tc.ok {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var fe *FenceError
		if !errors.Is(err, ErrFenced) || !errors.As(err, &fe) {
			t.Fatalf("%s: err = %v, want a FenceError", tc.name, err)
		}
		if fe.EpochLost() != tc.epochLost || !strings.Contains(err.Error(), tc.messageMention) {
			t.Errorf("%s: EpochLost = %v, message %q", tc.name, fe.EpochLost(), err)
		}
	}
	if err := CheckSave(Checkpoint{Stream: "s"}, Checkpoint{}); err != nil {
		t.Errorf("first save: %v", err)
	}
}

func TestValidDocumentAcceptsEveryType(t *testing.T) {
	doc, err := bson.Marshal(bson.D{
		{Key: "double", Value: 1.5}, {Key: "string", Value: "x"},
		{Key: "doc", Value: bson.D{{Key: "a", Value: bson.A{int32(1), int64(2)}}}},
		{Key: "bin", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}},
		{Key: "undefined", Value: bson.Undefined{}}, {Key: "oid", Value: bson.NewObjectID()},
		{Key: "bool", Value: true}, {Key: "date", Value: bson.DateTime(1)}, {Key: "null", Value: nil},
		{Key: "regex", Value: bson.Regex{Pattern: "^a", Options: "i"}},
		{Key: "dbptr", Value: bson.DBPointer{DB: "db.c", Pointer: bson.NewObjectID()}},
		{Key: "js", Value: bson.JavaScript("f()")}, {Key: "sym", Value: bson.Symbol("s")},
		{Key: "cws", Value: bson.CodeWithScope{Code: "g()", Scope: bson.D{{Key: "x", Value: int32(1)}}}},
		{Key: "ts", Value: bson.Timestamp{T: 1, I: 2}}, {Key: "dec", Value: bson.NewDecimal128(1, 2)},
		{Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := validDocument(doc, 0); err != nil {
		t.Fatalf("validDocument rejected a valid document: %v", err)
	}
	for i := 1; i < len(doc); i++ {
		if validDocument(doc[:i], 0) == nil {
			t.Fatalf("validDocument accepted a %d-byte prefix of a %d-byte document", i, len(doc))
		}
	}
}

func TestValidDocumentDepthLimit(t *testing.T) {
	d := bson.D{{Key: "x", Value: int32(1)}}
	for range maxDepth + 1 {
		d = bson.D{{Key: "a", Value: d}}
	}
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := validDocument(b, 0); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("validDocument of a document nested %d deep: %v", maxDepth+2, err)
	}
}

// FuzzValidDocument checks that validation never panics and is at least as
// strict as the driver's own check.
func FuzzValidDocument(f *testing.F) {
	for _, d := range []bson.D{
		{{Key: "_data", Value: "82"}},
		{{Key: "_data", Value: "82"}, {Key: "_typeBits", Value: bson.Binary{Data: []byte{1}}}},
		{{Key: "a", Value: bson.A{bson.D{{Key: "b", Value: nil}}, 1.0}}},
	} {
		b, _ := bson.Marshal(d)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if validDocument(b, 0) == nil {
			if err := bson.Raw(b).Validate(); err != nil {
				t.Fatalf("accepted a document the driver rejects: %v", err)
			}
			if _, err := bson.Raw(b).Elements(); err != nil {
				t.Fatalf("accepted a document whose elements do not parse: %v", err)
			}
		}
	})
}
