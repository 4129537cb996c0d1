package mongotest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/ferry-io/ferry/mongotest"
)

func codeOf(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	var we mongo.WriteException
	if errors.As(err, &we) && we.WriteConcernError != nil {
		return int32(we.WriteConcernError.Code)
	}
	return 0
}

// TestErrorLabels: the labels a 4.4+ server attaches by itself.
func TestErrorLabels(t *testing.T) {
	client, db, srv := connect(t)
	ctx := ctx(t)
	c := db.Collection("c")
	sess := startSession(t, client)

	// A write concern error with a retryable code on a retryable write.
	if srv != nil {
		srv.FailCommand(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1,
			WriteConcernError: bson.D{{Key: "code", Value: int32(91)}, {Key: "errmsg", Value: "Replication is being shut down"}}})
		raw := mustRaw(t)(retryable(ctx, db, sess, 1, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}))
		if got := labelsOf(raw); !slices.Equal(got, []string{"RetryableWriteError"}) {
			t.Fatalf("writeConcernError 91 on a retryable write: labels %v, want [RetryableWriteError]: %s", got, raw)
		}
		if name := raw.Lookup("writeConcernError", "codeName").StringValue(); name != "ShutdownInProgress" {
			t.Fatalf("writeConcernError codeName %q, want ShutdownInProgress", name)
		}
	}

	// A retryable write that fails without writing, on a connection that
	// has written before: RetryableWriteError and NoWritesPerformed.
	if srv != nil {
		rc := dialRaw(t, srv.Addr())
		defer rc.nc.Close()
		lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("labels0123456789")}}}
		write := func(n int64, id int) bson.Raw {
			return rc.run(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}},
				{Key: "$db", Value: db.Name()}, {Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: n}})
		}
		if raw := write(1, 10); rawInt(raw, "n") != 1 {
			t.Fatalf("first write: %s", raw)
		}
		srv.FailCommand(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, ErrorCode: 189})
		if raw := write(2, 11); !slices.Equal(labelsOf(raw), []string{"RetryableWriteError", "NoWritesPerformed"}) {
			t.Fatalf("PrimarySteppedDown before the write, after an earlier write: %s; want labels RetryableWriteError, NoWritesPerformed", raw)
		}
	}

	// NoSuchTransaction after an aborted statement: TransientTransactionError.
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: 1}}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("duplicate insert in a transaction: %v, want a duplicate key error", err)
	}
	_, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: 2}})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 251 || !ce.HasErrorLabel("TransientTransactionError") {
		t.Fatalf("statement after the abort: %v, want NoSuchTransaction (251) labelled TransientTransactionError", err)
	}
	_ = sess.AbortTransaction(ctx)
}

func labelsOf(raw bson.Raw) []string {
	var out []string
	vals, _ := raw.Lookup("errorLabels").Array().Values()
	for _, v := range vals {
		out = append(out, v.StringValue())
	}
	return out
}

// TestWriteConcernErrors: a write concern the replica set cannot satisfy
// is reported after the write is applied.
func TestWriteConcernErrors(t *testing.T) {
	_, db, srv := connect(t, mongotest.Secondaries(1))
	if srv == nil {
		t.Skip("the emulated set has two members; a real one may have more")
	}
	ctx := ctx(t)
	write := func(id int, wc *writeconcern.WriteConcern) error {
		c := db.Collection("c", options.Collection().SetWriteConcern(wc))
		_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}})
		return err
	}
	if err := write(1, &writeconcern.WriteConcern{W: 2}); err != nil {
		t.Fatalf("w: 2 on a primary and a secondary: %v", err)
	}
	if err := write(2, &writeconcern.WriteConcern{W: 3}); codeOf(err) != 100 {
		t.Fatalf("w: 3 on two members: %v, want UnsatisfiableWriteConcern (100)", err)
	}
	if err := write(3, &writeconcern.WriteConcern{W: "eastCoast"}); codeOf(err) != 79 {
		t.Fatalf("w: a tag mode: %v, want UnknownReplWriteConcern (79)", err)
	}
	if n, err := db.Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != 3 {
		t.Fatalf("%d documents, %v; want 3 (the writes apply before their write concern fails)", n, err)
	}
}

// TestSnapshotReads: a snapshot session reads every find at the cluster
// time of its first read; a time older than the history kept fails with
// SnapshotTooOld; writes refuse the read concern.
func TestSnapshotReads(t *testing.T) {
	client, db, srv := connect(t)
	ctx := ctx(t)
	c := db.Collection("c")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	snap, err := client.StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		t.Fatal(err)
	}
	defer snap.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, snap)
	readX := func(ctx context.Context) []int32 {
		t.Helper()
		cur, err := c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var docs []struct{ X int32 }
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		var xs []int32
		for _, d := range docs {
			xs = append(xs, d.X)
		}
		return xs
	}
	if got := readX(sctx); !slices.Equal(got, []int32{1}) {
		t.Fatalf("first snapshot read: %v, want [1]", got)
	}
	at := snap.SnapshotTime()
	if at.IsZero() {
		t.Fatal("the server returned no atClusterTime")
	}
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := readX(sctx); !slices.Equal(got, []int32{1}) {
		t.Fatalf("snapshot read after an update, an insert and a delete: %v, want [1] (the state at %v)", got, at)
	}
	if got := readX(ctx); !slices.Equal(got, []int32{5}) {
		t.Fatalf("plain read: %v, want [5]", got)
	}
	if _, err := c.InsertOne(sctx, bson.D{{Key: "_id", Value: 3}}); codeOf(err) != 72 {
		t.Fatalf("insert in a snapshot session: %v, want InvalidOptions (72)", err)
	}
	if srv == nil {
		return
	}
	srv.AdvanceClock(301 * time.Second) // past minSnapshotHistoryWindowInSeconds
	late, err := client.StartSession(options.Session().SetSnapshot(true).SetSnapshotTime(at))
	if err != nil {
		t.Fatal(err)
	}
	defer late.EndSession(ctx)
	if _, err := c.Find(mongo.NewSessionContext(ctx, late), bson.D{}); codeOf(err) != 239 {
		t.Fatalf("snapshot read older than the history window: %v, want SnapshotTooOld (239)", err)
	}
}

// TestDDLInTransaction: a collection and an index created in a transaction
// are private to it until it commits.
func TestDDLInTransaction(t *testing.T) {
	uri, _ := mongotest.URI(t)
	client := connectClient(t, options.Client().ApplyURI(uri))
	db := testDB(t, client)
	ctx := ctx(t)
	other := connectClient(t, options.Client().ApplyURI(uri))
	names := func() []string {
		t.Helper()
		n, err := other.Database(db.Name()).ListCollectionNames(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(n)
		return n
	}
	if err := db.CreateCollection(ctx, "existing"); err != nil {
		t.Fatal(err)
	}
	sess := startSession(t, client)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if err := db.CreateCollection(sctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("fresh").Indexes().CreateOne(sctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("implicit").InsertOne(sctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"existing"}) {
		t.Fatalf("collections seen outside the transaction: %v, want [existing]", got)
	}
	if n, err := db.Collection("implicit").CountDocuments(sctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("the transaction counts %d documents in its new collection, %v; want 1", n, err)
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"existing", "fresh", "implicit"}) {
		t.Fatalf("collections after the commit: %v", got)
	}
	specs, err := other.Database(db.Name()).Collection("fresh").Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 2 || specs[1].Name != "k_1" {
		t.Fatalf("indexes of the new collection: %v, %v; want _id_ and k_1", specs, err)
	}

	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	_, err = db.Collection("existing").Indexes().CreateOne(sctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}})
	if codeOf(err) != 263 {
		t.Fatalf("createIndexes on an existing collection in a transaction: %v, want OperationNotSupportedInTransaction (263)", err)
	}
	_ = sess.AbortTransaction(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateCollection(sctx, "existing"); codeOf(err) != 48 {
		t.Fatalf("create of an existing collection in a transaction: %v, want NamespaceExists (48)", err)
	}
	_ = sess.AbortTransaction(ctx)
}

// TestSecondaries: a secondary serves reads that allow it (an aggregate
// with $out among them), and refuses writes.
func TestSecondaries(t *testing.T) {
	_, db, srv := connect(t, mongotest.Secondaries(1))
	if srv == nil {
		t.Skip("needs the emulator's secondary addresses")
	}
	ctx := ctx(t)
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	sec := srv.SecondaryAddrs()[0]
	var readFrom []string
	mon := &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName == "find" {
			readFrom = append(readFrom, ev.ConnectionID)
		}
	}}
	rc := connectClient(t, options.Client().ApplyURI(srv.URI()).SetReadPreference(readpref.Secondary()).SetMonitor(mon))
	n, err := rc.Database(db.Name()).Collection("c").CountDocuments(ctx, bson.D{}, options.Count())
	if err != nil || n != 1 {
		t.Fatalf("count on the secondary: %d, %v; want 1", n, err)
	}
	if err := rc.Database(db.Name()).Collection("c").FindOne(ctx, bson.D{}).Err(); err != nil {
		t.Fatal(err)
	}
	if len(readFrom) != 1 || !strings.HasPrefix(readFrom[0], sec) {
		t.Fatalf("find went to %v, want the secondary %s", readFrom, sec)
	}
	direct := connectClient(t, options.Client().SetHosts([]string{sec}).SetDirect(true).SetRetryWrites(false))
	_, err = direct.Database(db.Name()).Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	if codeOf(err) != 10107 {
		t.Fatalf("insert on a secondary: %v, want NotWritablePrimary (10107)", err)
	}
	// An aggregate with $out runs on a secondary (MongoDB 4.4+) and
	// writes through the primary.
	cur, err := direct.Database(db.Name()).Collection("c").Aggregate(ctx, mongo.Pipeline{{{Key: "$out", Value: "copy"}}})
	if err != nil {
		t.Fatalf("aggregate $out on a secondary: %v", err)
	}
	_ = cur.Close(ctx)
	if n, err := db.Collection("copy").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("the $out output on the primary: %d documents, %v; want 1", n, err)
	}
	hello := mustRaw(t)(direct.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw())
	if hello.Lookup("secondary").Boolean() != true || hello.Lookup("isWritablePrimary").Boolean() || hello.Lookup("primary").StringValue() != srv.Addr() {
		t.Fatalf("the secondary's hello: %s", hello)
	}
}

// TestEndSessionsAbortsTheTransaction: ending a session aborts its open
// transaction and releases its documents.
func TestEndSessionsAbortsTheTransaction(t *testing.T) {
	client, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("c")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	sess := startSession(t, client)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := c.UpdateOne(sctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	lsid := sess.ID()
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "endSessions", Value: bson.A{lsid}}}).Err(); err != nil {
		t.Fatal(err)
	}
	// The document is free: this write does not wait for the transaction.
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if err := sess.CommitTransaction(ctx); codeOf(err) != 251 {
		t.Fatalf("commit of the ended session's transaction: %v, want NoSuchTransaction (251)", err)
	}
	var doc struct{ X int32 }
	if err := c.FindOne(ctx, bson.D{}).Decode(&doc); err != nil || doc.X != 2 {
		t.Fatalf("document x = %d, %v; want 2", doc.X, err)
	}
}

// TestTransactionAtClusterTime: a transaction started with readConcern
// snapshot and atClusterTime reads the state of that time.
func TestTransactionAtClusterTime(t *testing.T) {
	client, db, srv := connect(t)
	if srv == nil {
		t.Skip("sends raw commands to the emulator's address")
	}
	ctx := ctx(t)
	c := db.Collection("c")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	snap, err := client.StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		t.Fatal(err)
	}
	defer snap.EndSession(ctx)
	if err := c.FindOne(mongo.NewSessionContext(ctx, snap), bson.D{}).Err(); err != nil {
		t.Fatal(err)
	}
	at := snap.SnapshotTime()
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("fedcba9876543210")}}}
	reply := rawCommand(t, srv.Addr(), bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: db.Name()},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "startTransaction", Value: true}, {Key: "autocommit", Value: false},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: at}}}})
	docs, _ := reply.Lookup("cursor", "firstBatch").Array().Values()
	if len(docs) != 1 || docs[0].Document().Lookup("x").AsInt64() != 1 {
		t.Fatalf("find in a transaction at %v: %s; want x: 1 (the value then)", at, reply)
	}
	abort := rawCommand(t, srv.Addr(), bson.D{{Key: "abortTransaction", Value: 1}, {Key: "$db", Value: "admin"},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "autocommit", Value: false}})
	if rawInt(abort, "ok") != 1 {
		t.Fatalf("abort: %s", abort)
	}
}

// TestMisusedSessionFields: session fields a server refuses before it runs
// the command.
func TestMisusedSessionFields(t *testing.T) {
	_, db, srv := connect(t)
	if srv == nil {
		t.Skip("sends raw commands to the emulator's address")
	}
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("misuse0123456789")}}}
	insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}, {Key: "$db", Value: db.Name()}}
	with := func(fields ...bson.E) bson.D { return append(append(bson.D(nil), insert...), fields...) }
	cases := []struct {
		name string
		cmd  bson.D
		code int32
	}{
		{"txnNumber without lsid", with(bson.E{Key: "txnNumber", Value: int64(1)}), 72},
		{"autocommit without txnNumber", with(bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "autocommit", Value: false}), 72},
		{"autocommit true", with(bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: int64(1)}, bson.E{Key: "autocommit", Value: true}), 72},
		{"startTransaction without autocommit", with(bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: int64(1)}, bson.E{Key: "startTransaction", Value: true}), 72},
		{"startTransaction false", with(bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: int64(1)}, bson.E{Key: "autocommit", Value: false}, bson.E{Key: "startTransaction", Value: false}), 9},
	}
	for _, tc := range cases {
		raw := rawCommand(t, srv.Addr(), tc.cmd)
		if rawInt(raw, "ok") != 0 || rawInt(raw, "code") != int64(tc.code) {
			t.Errorf("%s: %s; want code %d", tc.name, raw, tc.code)
		}
	}
	if n, err := db.Collection("c").CountDocuments(ctx(t), bson.D{}); err != nil || n != 0 {
		t.Fatalf("%d documents, %v; want none (every command refused before running)", n, err)
	}
}

// TestSnapshotReadBeforeTheFirstOne: a snapshot read at a cluster time
// before any snapshot read (a change stream's position, say) reads that
// state, as on a real server, whose history covers the last 300 s: the
// emulator keeps versions from its first snapshot read on, and nothing
// had changed since that time. Only a time whose versions it discarded
// fails with SnapshotTooOld.
func TestSnapshotReadBeforeTheFirstOne(t *testing.T) {
	client, db, srv := connect(t)
	ctx := ctx(t)
	c, other := db.Collection("c"), db.Collection("other")
	opTime := func() bson.Timestamp {
		t.Helper()
		s, err := client.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.EndSession(ctx)
		if _, err := other.InsertOne(mongo.NewSessionContext(ctx, s), bson.D{}); err != nil {
			t.Fatal(err)
		}
		return *s.OperationTime()
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	at := opTime() // later writes elsewhere change nothing c's snapshot needs
	opTime()
	readAt := func(at bson.Timestamp) (int32, error) {
		t.Helper()
		s, err := client.StartSession(options.Session().SetSnapshot(true).SetSnapshotTime(at))
		if err != nil {
			t.Fatal(err)
		}
		defer s.EndSession(ctx)
		var d struct{ X int32 }
		err = c.FindOne(mongo.NewSessionContext(ctx, s), bson.D{{Key: "_id", Value: 1}}).Decode(&d)
		return d.X, err
	}
	if x, err := readAt(at); err != nil || x != 1 {
		t.Fatalf("first snapshot read, at a time before it: x = %d, %v; want 1", x, err)
	}
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if x, err := readAt(at); err != nil || x != 1 {
		t.Fatalf("snapshot read after an update: x = %d, %v; want 1 (the state at %v)", x, err, at)
	}
	if srv == nil {
		return
	}
	// Past the window with no snapshot read, the emulator keeps no
	// versions: an update then discards the one a snapshot before it needs.
	srv.AdvanceClock(301 * time.Second)
	before := opTime()
	// A write elsewhere discards nothing c's snapshot reads.
	if _, err := other.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if x, err := readAt(before); err != nil || x != 2 {
		t.Fatalf("snapshot read of c after a write to another collection: x = %d, %v; want 2", x, err)
	}
	// That read kept history again for the window; past it, a write to c
	// itself discards what an earlier snapshot of c needs.
	srv.AdvanceClock(301 * time.Second)
	before = opTime()
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 3}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := readAt(before); codeOf(err) != 239 {
		t.Fatalf("snapshot read before a write that kept no history: %v, want SnapshotTooOld (239)", err)
	}
	if x, err := readAt(opTime()); err != nil || x != 3 {
		t.Fatalf("snapshot read after it: x = %d, %v; want 3", x, err)
	}
}
