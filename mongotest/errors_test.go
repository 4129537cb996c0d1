package mongotest_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/mongoerr"
)

// TestErrorCodeNames: every error reply carries the codeName of mongoerr's
// one table, whether the emulator raised the error or its query engine
// did (an update path, a $convert), and Location<code> for a code without
// a name.
func TestErrorCodeNames(t *testing.T) {
	_, db, _ := connect(t)
	if _, err := db.Collection("c").InsertOne(ctx(t), bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cmd  bson.D
		code int32
		want string
	}{
		{"unknown command", bson.D{{Key: "noSuchCommand", Value: 1}}, mongoerr.CodeCommandNotFound, "CommandNotFound"},
		{"update through a scalar", bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
			{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a.b", Value: 1}}}}}}, mongoerr.CodePathNotViable, "PathNotViable"},
		{"$convert without onError", bson.D{{Key: "aggregate", Value: "c"}, {Key: "cursor", Value: bson.D{}},
			{Key: "pipeline", Value: bson.A{bson.D{{Key: "$project", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$convert",
				Value: bson.D{{Key: "input", Value: "abc"}, {Key: "to", Value: "int"}}}}}}}}}}}, mongoerr.CodeConversionFailure, "ConversionFailure"},
		{"unknown stage", bson.D{{Key: "aggregate", Value: "c"}, {Key: "cursor", Value: bson.D{}},
			{Key: "pipeline", Value: bson.A{bson.D{{Key: "$frob", Value: bson.D{}}}}}}, 40324, "Location40324"},
	}
	for _, c := range cases {
		err := db.RunCommand(ctx(t), c.cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Errorf("%s: error %v, want a command error", c.name, err)
			continue
		}
		if ce.Code != c.code || ce.Name != c.want {
			t.Errorf("%s: code %d codeName %q, want %d %q (%s)", c.name, ce.Code, ce.Name, c.code, c.want, ce.Message)
		}
	}
}
