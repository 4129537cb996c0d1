package mongotest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/mongotest/internal/wire"
)

// retryable sends cmd as a retryable write of sess with txnNumber n, the
// way a driver sends it and re-sends it after a lost reply (RunCommand
// itself never retries).
// The reply comes back whole even when it holds write errors or a write
// concern error (which RunCommand turns into a WriteException).
func retryable(ctx context.Context, db *mongo.Database, sess *mongo.Session, n int64, cmd bson.D) (bson.Raw, error) {
	cmd = append(cmd[:len(cmd):len(cmd)], bson.E{Key: "txnNumber", Value: n})
	raw, err := db.RunCommand(mongo.NewSessionContext(ctx, sess), cmd).Raw()
	var we mongo.WriteException
	if errors.As(err, &we) && we.Raw != nil {
		return we.Raw, nil
	}
	return raw, err
}

// mustRaw returns a function that fails the test on an error and returns
// the reply otherwise: mustRaw(t)(db.RunCommand(...).Raw()).
func mustRaw(t *testing.T) func(bson.Raw, error) bson.Raw {
	return func(raw bson.Raw, err error) bson.Raw {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
}

func rawInt(raw bson.Raw, key string) int64 {
	v := raw.Lookup(key)
	if n, ok := v.AsInt64OK(); ok {
		return n
	}
	return -1
}

func startSession(t *testing.T, client *mongo.Client) *mongo.Session {
	t.Helper()
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.EndSession(context.Background()) })
	return sess
}

// nextEvents reads n events from the change stream and then checks that no
// further one follows; it returns their operation types.
func nextEvents(t *testing.T, ctx context.Context, cs *mongo.ChangeStream, n int) []string {
	t.Helper()
	var ops []string
	for len(ops) < n && cs.Next(ctx) {
		ops = append(ops, cs.Current.Lookup("operationType").StringValue())
	}
	if len(ops) < n {
		t.Fatalf("change stream: %v after %v, want %d events", cs.Err(), ops, n)
	}
	// An empty batch is the end of what is there (the first TryNext may
	// only consume the aggregate's empty first batch).
	for i := 0; i < 2; i++ {
		if cs.TryNext(ctx) {
			t.Fatalf("change stream: an event %s after the %d expected (%v)", cs.Current.Lookup("operationType"), n, ops)
		}
	}
	return ops
}

// TestRetryableWriteRetryIsNotReapplied: a write sent again with the same
// lsid and txnNumber returns the first attempt's result and changes
// nothing; an older txnNumber is refused.
func TestRetryableWriteRetryIsNotReapplied(t *testing.T) {
	client, db, _ := connect(t)
	ctx := ctx(t)
	c := db.Collection("c")
	cs := watch(t, ctx, c, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(10*time.Millisecond))
	defer cs.Close(ctx)
	sess := startSession(t, client)

	insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}}}}
	for i := 0; i < 2; i++ {
		if raw := mustRaw(t)(retryable(ctx, db, sess, 1, insert)); rawInt(raw, "n") != 1 || raw.Lookup("writeErrors").Type != 0 {
			t.Fatalf("insert attempt %d: %s; want n: 1 and no duplicate-key error", i+1, raw)
		}
	}
	inc := bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}}}}}
	for i := 0; i < 2; i++ {
		if raw := mustRaw(t)(retryable(ctx, db, sess, 2, inc)); rawInt(raw, "n") != 1 || rawInt(raw, "nModified") != 1 {
			t.Fatalf("update attempt %d: %s; want n: 1, nModified: 1", i+1, raw)
		}
	}
	fam := bson.D{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}}}, {Key: "new", Value: true}}
	for i := 0; i < 2; i++ {
		raw := mustRaw(t)(retryable(ctx, db, sess, 3, fam))
		if n := raw.Lookup("value", "n").AsInt64(); n != 11 {
			t.Fatalf("findAndModify attempt %d returned n = %d, want 11 (the document the first attempt produced)", i+1, n)
		}
	}
	var doc struct{ N int64 }
	if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc.N != 11 {
		t.Fatalf("document n = %d, %v; want 11 (each write applied once)", doc.N, err)
	}
	if got := nextEvents(t, ctx, cs, 3); !slices.Equal(got, []string{"insert", "update", "update"}) {
		t.Fatalf("change events %v, want one insert and two updates", got)
	}
	_, err := retryable(ctx, db, sess, 2, inc)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 225 || ce.Name != "TransactionTooOld" {
		t.Fatalf("write with an older txnNumber: %v, want TransactionTooOld (225)", err)
	}
	// Another session has txnNumbers of its own.
	other := startSession(t, client)
	if raw := mustRaw(t)(retryable(ctx, db, other, 2, inc)); rawInt(raw, "nModified") != 1 {
		t.Fatalf("update on another session: %s, want it applied", raw)
	}
}

// TestRetryRunsOnlyTheStatementsThatDidNotRun: a batch whose second
// statement failed before commit runs, on retry, that statement and the
// ones after it, and reports the whole batch.
func TestRetryRunsOnlyTheStatementsThatDidNotRun(t *testing.T) {
	client, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator's fail point from Go")
	}
	ctx := ctx(t)
	sess := startSession(t, client)
	srv.FailRetryableWrites(mongotest.RetryableWriteFailPoint{Skip: 1, Times: 1, KeepConnection: true, FailBeforeCommit: 91})
	insert := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "_id", Value: "c"}}}}}
	raw := mustRaw(t)(retryable(ctx, db, sess, 7, insert))
	we, _ := raw.Lookup("writeErrors").Array().Values()
	if rawInt(raw, "n") != 1 || len(we) != 1 || rawInt(we[0].Document(), "index") != 1 || rawInt(we[0].Document(), "code") != 91 {
		t.Fatalf("first attempt: %s; want n: 1 and statement 1 failed with 91", raw)
	}
	raw = mustRaw(t)(retryable(ctx, db, sess, 7, insert))
	if rawInt(raw, "n") != 3 || raw.Lookup("writeErrors").Type != 0 {
		t.Fatalf("retry: %s; want n: 3 (statement 0 remembered, 1 and 2 run) and no write errors", raw)
	}
	if n, err := db.Collection("c").CountDocuments(ctx, bson.D{}); err != nil || n != 3 {
		t.Fatalf("%d documents, %v; want 3", n, err)
	}
}

// TestRetryWaitsForTheFirstAttempt: a retry that arrives while the first
// attempt still runs (here: waiting for a transaction's document) waits
// for the session, then answers with the first attempt's result. The two
// attempts go over two connections with one lsid, as a driver's retry
// after a dropped connection does.
func TestRetryWaitsForTheFirstAttempt(t *testing.T) {
	client, db, srv := connect(t)
	if srv == nil {
		t.Skip("needs the emulator's wait counters")
	}
	ctx := ctx(t)
	c := db.Collection("c")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	holder := startSession(t, client)
	if err := holder.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	hctx := mongo.NewSessionContext(ctx, holder)
	if _, err := c.UpdateOne(hctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "t", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}}}
	inc := bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)}, {Key: "$db", Value: db.Name()}}
	replies := make(chan bson.Raw, 2)
	send := func() {
		replies <- rawCommand(t, srv.Addr(), inc)
	}
	go send()
	until(t, 10*time.Second, waiting(srv, 0, 1)) // the first attempt waits for the transaction
	go send()
	until(t, 10*time.Second, waiting(srv, 1, 1)) // the retry waits for the session
	if err := holder.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if raw := <-replies; rawInt(raw, "ok") != 1 || rawInt(raw, "nModified") != 1 {
			t.Fatalf("attempt: %s; want ok: 1, nModified: 1", raw)
		}
	}
	var doc struct{ N, T int64 }
	if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc); err != nil || doc.N != 1 || doc.T != 1 {
		t.Fatalf("document %+v, %v; want n: 1 (applied once) and t: 1", doc, err)
	}
}

// rawCommand sends one OP_MSG command on a connection of its own and
// returns the reply (errors are reported with t.Error, as this runs on
// goroutines of the test).
func rawCommand(t *testing.T, addr string, cmd bson.D) bson.Raw {
	rc := dialRaw(t, addr)
	if rc == nil {
		return nil
	}
	defer rc.nc.Close()
	return rc.run(t, cmd)
}

// rawConn is one connection to the server, commands sent as OP_MSG.
type rawConn struct {
	nc net.Conn
	br *bufio.Reader
	id int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return nil
	}
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	return &rawConn{nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) run(t *testing.T, cmd bson.D) bson.Raw {
	body, err := bson.Marshal(cmd)
	if err != nil {
		t.Error(err)
		return nil
	}
	c.id++
	if _, err := c.nc.Write(wire.AppendMsg(nil, c.id, 0, 0, body)); err != nil {
		t.Error(err)
		return nil
	}
	h, b, err := wire.ReadMessage(c.br, 48_000_000)
	if err != nil {
		t.Error(err)
		return nil
	}
	m, err := wire.ParseMsg(h, b)
	if err != nil {
		t.Error(err)
		return nil
	}
	return m.Body
}

// waiting is an until condition: the server has exactly the given numbers
// of commands waiting for a session and for a transaction.
func waiting(srv *mongotest.Server, onSession, onTxn int) func() error {
	return func() error {
		if s, x := mongotest.Waiting(srv); s != onSession || x != onTxn {
			return fmt.Errorf("waiting commands: %d on a session, %d on a transaction; want %d and %d", s, x, onSession, onTxn)
		}
		return nil
	}
}

// TestRetryableWriteRules: a write the server does not run as a retryable
// write (multi: true, limit 0, a read) is refused, and a txnNumber used by
// a transaction cannot be reused for a retryable write.
func TestRetryableWriteRules(t *testing.T) {
	client, db, _ := connect(t)
	ctx := ctx(t)
	sess := startSession(t, client)
	cases := []struct {
		cmd  bson.D
		code int32
	}{
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "multi", Value: true}}}}}, 72},
		{bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}}, 72},
		{bson.D{{Key: "find", Value: "c"}}, 50768},
	}
	for i, tc := range cases {
		_, err := retryable(ctx, db, sess, int64(i+1), tc.cmd)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s with txnNumber: %v, want code %d", tc.cmd[0].Key, err, tc.code)
		}
	}
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("c").InsertOne(mongo.NewSessionContext(ctx, sess), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	// The driver numbered that transaction 1.
	_, err := retryable(ctx, db, sess, 1, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 2}}}}})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 72 {
		t.Fatalf("retryable write with the txnNumber of a committed transaction: %v, want InvalidOptions (72)", err)
	}
}
