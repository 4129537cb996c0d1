package mongotest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// commandError returns err's server code, codeName and message.
func commandError(err error) (int32, string, string) {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code, ce.Name, ce.Message
	}
	return 0, "", ""
}

// watchErr opens (and closes) a change stream on coll and returns the
// aggregate's error.
func watchErr(ctx context.Context, coll *mongo.Collection, pipeline mongo.Pipeline, opts ...options.Lister[options.ChangeStreamOptions]) error {
	cs, err := coll.Watch(ctx, pipeline, opts...)
	if err == nil {
		cs.Close(ctx)
	}
	return err
}

var (
	splitStage = mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}
	hashMatch  = mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{
		bson.D{{Key: "$abs", Value: bson.D{{Key: "$mod", Value: bson.A{bson.D{{Key: "$toHashedIndexKey", Value: "$documentKey._id"}}, 2}}}}}, 0}}}}}}}}
)

// TestOlderReleases: a server emulating a release before 8.0 reports it
// (buildInfo, maxWireVersion, featureCompatibilityVersion) and refuses
// what that release lacks, with its error: the split stage before 7.0 and
// 6.0.9 (40324), pre- and post-images before 6.0 (40575 for the
// fullDocument modes, 40415 for fullDocumentBeforeChange and create's
// option, InvalidOptions for collMod's), $toHashedIndexKey in 4.4 (168).
func TestOlderReleases(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		version        string
		wire           int32
		split, images  bool
		hashedIndexKey bool
	}{
		{"4.4.29", 9, false, false, false},
		{"5.0.0", 13, false, false, true},
		{"6.0.8", 17, false, true, true},
		{"6.0.9", 17, true, true, true},
		{"7.0.0", 21, true, true, true},
		{"8.0.4", 25, true, true, true},
	} {
		t.Run(tc.version, func(t *testing.T) {
			client, srv := mongotest.Client(t, mongotest.ServerVersion(tc.version))
			if srv == nil {
				t.Skip("a real server is what it is: the emulator's releases only")
			}
			admin := client.Database("admin")
			var hello struct {
				MaxWireVersion int32 `bson:"maxWireVersion"`
			}
			var fcv struct {
				FCV struct{ Version string } `bson:"featureCompatibilityVersion"`
			}
			if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil || hello.MaxWireVersion != tc.wire {
				t.Errorf("maxWireVersion %d (%v), want %d", hello.MaxWireVersion, err, tc.wire)
			}
			err := admin.RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}}).Decode(&fcv)
			if want := tc.version[:3]; err != nil || fcv.FCV.Version != want {
				t.Errorf("featureCompatibilityVersion %q (%v), want %q", fcv.FCV.Version, err, want)
			}
			coll := client.Database("d").Collection("c")
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
				t.Fatal(err)
			}

			code, _, msg := commandError(watchErr(ctx, coll, splitStage))
			switch {
			case tc.split && code != 0:
				t.Errorf("split stage refused: %d %s", code, msg)
			case !tc.split && (code != 40324 || msg != "Unrecognized pipeline stage name: '$changeStreamSplitLargeEvent'"):
				t.Errorf("split stage: %d %q; want 40324 Unrecognized pipeline stage name", code, msg)
			}

			code, _, msg = commandError(watchErr(ctx, coll, hashMatch))
			switch {
			case tc.hashedIndexKey && code != 0:
				t.Errorf("$toHashedIndexKey refused: %d %s", code, msg)
			case !tc.hashedIndexKey && (code != 168 || !strings.Contains(msg, "Unrecognized expression '$toHashedIndexKey'")):
				t.Errorf("$toHashedIndexKey: %d %q; want 168 Unrecognized expression", code, msg)
			}

			imageErrs := []struct {
				what string
				err  error
				code int32
			}{
				{"fullDocument required", watchErr(ctx, coll, nil, options.ChangeStream().SetFullDocument(options.Required)), 40575},
				{"fullDocumentBeforeChange", watchErr(ctx, coll, nil, options.ChangeStream().SetFullDocumentBeforeChange(options.WhenAvailable)), 40415},
				{"showExpandedEvents", watchErr(ctx, coll, nil, options.ChangeStream().SetShowExpandedEvents(true)), 40415},
				{"collMod", client.Database("d").RunCommand(ctx, bson.D{{Key: "collMod", Value: "c"},
					{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(), 72},
				{"create", client.Database("d").RunCommand(ctx, bson.D{{Key: "create", Value: "c2"},
					{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(), 40415},
			}
			for _, ie := range imageErrs {
				code, _, msg := commandError(ie.err)
				switch {
				case tc.images && ie.err != nil:
					t.Errorf("%s refused: %v", ie.what, ie.err)
				case !tc.images && code != ie.code:
					t.Errorf("%s: %d %q; want %d", ie.what, code, msg, ie.code)
				}
			}
		})
	}
	if _, err := mongotest.Start(mongotest.ServerVersion("4.2.0")); err == nil || !strings.Contains(err.Error(), "from 4.4") {
		t.Errorf("ServerVersion 4.2.0: %v; want refused (the driver needs 4.4)", err)
	}
}

// TestAtlasSharedTier: AtlasSharedTier refuses the split stage and
// getParameter featureCompatibilityVersion with Atlas's AtlasError (8000)
// and its message, and allows the two getParameter forms the tier runs.
func TestAtlasSharedTier(t *testing.T) {
	ctx := context.Background()
	client, srv := mongotest.Client(t, mongotest.AtlasSharedTier())
	if srv == nil {
		t.Skip("emulator-only: a real server is not an Atlas shared tier")
	}
	coll := client.Database("d").Collection("c")
	code, name, msg := commandError(watchErr(ctx, coll, splitStage))
	if code != 8000 || name != "AtlasError" || !strings.HasPrefix(msg, "$changeStreamSplitLargeEvent is not allowed") {
		t.Errorf("split stage: %d %s %q; want 8000 AtlasError, $changeStreamSplitLargeEvent is not allowed", code, name, msg)
	}
	if err := watchErr(ctx, coll, hashMatch); err != nil {
		t.Errorf("a change stream without the split stage: %v", err)
	}
	admin := client.Database("admin")
	code, name, _ = commandError(admin.RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}}).Err())
	if code != 8000 || name != "AtlasError" {
		t.Errorf("getParameter featureCompatibilityVersion: %d %s; want 8000 AtlasError", code, name)
	}
	for _, p := range []string{"authSchemaVersion", "authenticationMechanisms"} {
		if err := admin.RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: p, Value: 1}}).Err(); err != nil {
			t.Errorf("getParameter %s: %v; the tier allows it", p, err)
		}
	}
}

// TestStandalone: a standalone server's hello names no replica set, so the
// driver sees a standalone topology; documents are written and read, and
// a change stream fails with 40573 as on a mongod without --replSet.
func TestStandalone(t *testing.T) {
	ctx := context.Background()
	srv := mongotest.New(t, mongotest.Standalone())
	if strings.Contains(srv.URI(), "replicaSet") {
		t.Fatalf("URI %s names a replica set", srv.URI())
	}
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(ctx) })
	raw, err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"setName", "hosts", "lastWrite", "$clusterTime", "operationTime"} {
		if _, err := raw.LookupErr(f); err == nil {
			t.Errorf("hello has %s: %s", f, raw)
		}
	}
	if w, _ := raw.Lookup("isWritablePrimary").BooleanOK(); !w {
		t.Errorf("hello: not writable: %s", raw)
	}
	coll := client.Database("d").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("count %d, %v", n, err)
	}
	code, _, msg := commandError(watchErr(ctx, coll, nil))
	if code != 40573 || !strings.Contains(msg, "only supported on replica sets") {
		t.Errorf("watch on a standalone server: %d %q; want 40573", code, msg)
	}
}
