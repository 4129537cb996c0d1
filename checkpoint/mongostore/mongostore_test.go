package mongostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/checkpointtest"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/internal/emutest"
)

// freshDB returns a database no other test uses, dropped when the test ends
// (so the suite can share a real replica set).
func freshDB(t *testing.T, client *mongo.Client) *mongo.Database {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	db := client.Database("ferry_checkpoint_test_" + hex.EncodeToString(b[:]))
	t.Cleanup(func() { db.Drop(context.Background()) })
	return db
}

func newStore(t *testing.T, db *mongo.Database, opts ...mongostore.Option) *mongostore.Store {
	t.Helper()
	s, err := mongostore.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	client, _ := emutest.Client(t)
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store {
		s, err := mongostore.New(freshDB(t, client))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestSnapshotRequestsContract(t *testing.T) {
	client, _ := emutest.Client(t)
	checkpointtest.RunSnapshotRequests(t, func(t *testing.T) checkpoint.Store {
		s, err := mongostore.New(freshDB(t, client))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func sample(t *testing.T, stream string, partition int) checkpoint.Checkpoint {
	tok, err := bson.Marshal(bson.D{
		{Key: "_data", Value: "8265A1B2C3000000012B042C0100296E5A1004"},
		{Key: "_typeBits", Value: bson.Binary{Data: []byte{0x40}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.Checkpoint{Stream: stream, Partition: partition, Token: tok, Epoch: 2, Identity: "abc"}
}

// TestDocumentLayout pins the stored layout that operators read and other
// tools may query.
func TestDocumentLayout(t *testing.T) {
	client, _ := emutest.Client(t)
	db := freshDB(t, client)
	s := newStore(t, db, mongostore.Collection("cp"))
	cp := sample(t, "shop.orders", 7)
	cp.ClusterTime = bson.Timestamp{T: 1700000000, I: 3}
	cp.Snapshot, _ = bson.Marshal(bson.D{{Key: "chunks", Value: int32(3)}})
	saved, err := s.Save(t.Context(), cp)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := db.Collection("cp").FindOne(t.Context(), bson.D{{Key: "_id", Value: "shop.orders/7"}}).Raw()
	if err != nil {
		t.Fatalf("document not found under _id shop.orders/7 in collection cp: %v", err)
	}
	if mongostore.ID("shop.orders", 7) != "shop.orders/7" {
		t.Fatalf("ID = %q", mongostore.ID("shop.orders", 7))
	}
	sub, data, ok := raw.Lookup("token").BinaryOK()
	if !ok || sub != 0 || !bytes.Equal(data, cp.Token) {
		t.Fatalf("token stored as %v, want BinData(0) of the raw token", raw.Lookup("token"))
	}
	if sub, data, ok := raw.Lookup("snapshot").BinaryOK(); !ok || sub != 0 || !bytes.Equal(data, cp.Snapshot) {
		t.Fatalf("snapshot stored as %v, want BinData(0) of the raw progress record", raw.Lookup("snapshot"))
	}
	for field, want := range map[string]bson.Type{
		"stream": bson.TypeString, "partition": bson.TypeInt64, "version": bson.TypeInt64,
		"epoch": bson.TypeInt64, "clusterTime": bson.TypeTimestamp, "updatedAt": bson.TypeDateTime,
		"definition": bson.TypeNull, "pendingSince": bson.TypeNull, "state": bson.TypeString,
		"identity": bson.TypeString, "note": bson.TypeString, "readDelayMs": bson.TypeInt64,
	} {
		if got := raw.Lookup(field).Type; got != want {
			t.Errorf("field %s has type %v, want %v", field, got, want)
		}
	}
	if ms, _ := raw.Lookup("updatedAt").DateTimeOK(); ms != saved.UpdatedAt.UnixMilli() {
		t.Errorf("stored updatedAt %d ms, Save returned %v", ms, saved.UpdatedAt)
	}
	// Every field of the layout, and no other (in the order the server
	// stores them: update operators add new fields in lexicographic order).
	elems, _ := raw.Elements()
	var fields []string
	for _, e := range elems {
		fields = append(fields, e.Key())
	}
	slices.Sort(fields)
	if got, want := strings.Join(fields, " "), "_id clusterTime definition epoch identity note partition pendingSince readDelayMs snapshot state stream token updatedAt version"; got != want {
		t.Errorf("stored fields %q, want %q", got, want)
	}
	// Without a snapshot the field is null.
	saved.Snapshot = nil
	if _, err := s.Save(t.Context(), saved); err != nil {
		t.Fatal(err)
	}
	raw, _ = db.Collection("cp").FindOne(t.Context(), bson.D{{Key: "_id", Value: "shop.orders/7"}}).Raw()
	if got := raw.Lookup("snapshot").Type; got != bson.TypeNull {
		t.Errorf("snapshot of a checkpoint saved without one has type %v, want null", got)
	}
}

// TestUpdatedAtIsServerTime checks that UpdatedAt comes from the server's
// clock, not the client's (emulator only: it moves the server's clock).
func TestUpdatedAtIsServerTime(t *testing.T) {
	client, srv := emutest.Client(t)
	if srv == nil {
		t.Skip("needs the emulator's clock control")
	}
	s := newStore(t, client.Database("ferry"))
	first, err := s.Save(t.Context(), sample(t, "orders", 0))
	if err != nil {
		t.Fatal(err)
	}
	const ahead = 10 * 24 * time.Hour
	srv.AdvanceClock(ahead)
	second, err := s.Save(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	if d := second.UpdatedAt.Sub(first.UpdatedAt); d < ahead {
		t.Fatalf("UpdatedAt moved by %v after the server clock moved ten days", d)
	}
}

// TestSaveInTransaction checks that a Save given a session context in a
// transaction belongs to it: gone when it aborts, visible when it commits.
func TestSaveInTransaction(t *testing.T) {
	client, _ := emutest.Client(t)
	db := freshDB(t, client)
	ctx := t.Context()
	s := newStore(t, db)
	// Create the collections outside the transactions (needed before
	// MongoDB 4.4, harmless after).
	for _, name := range []string{"checkpoints", "ledger"} {
		if err := db.CreateCollection(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	ledger := db.Collection("ledger")

	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())

	// Aborted: neither the ledger entry nor the checkpoint remain.
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := ledger.InsertOne(sctx, bson.D{{Key: "_id", Value: "event-1"}}); err != nil {
		t.Fatal(err)
	}
	inTxn, err := s.Save(sctx, sample(t, "orders", 0))
	if err != nil {
		t.Fatalf("Save in a transaction: %v", err)
	}
	if inTxn.Version != 1 {
		t.Fatalf("Save in a transaction returned version %d", inTxn.Version)
	}
	if _, err := s.Load(ctx, "orders", 0); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("uncommitted Save visible outside the transaction: err = %v", err)
	}
	if got, err := s.Load(sctx, "orders", 0); err != nil || got.Version != 1 {
		t.Fatalf("Load inside the transaction = version %d, %v; want its own write", got.Version, err)
	}
	if err := sess.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "orders", 0); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("aborted Save is visible: err = %v", err)
	}
	if n, _ := ledger.CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("aborted ledger insert is visible")
	}

	// Committed: both are visible, with the version the Save returned.
	res, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		if _, err := ledger.InsertOne(sctx, bson.D{{Key: "_id", Value: "event-1"}}); err != nil {
			return nil, err
		}
		return s.Save(sctx, sample(t, "orders", 0))
	})
	if err != nil {
		t.Fatalf("committed transaction: %v", err)
	}
	committed := res.(checkpoint.Checkpoint)
	got, err := s.Load(ctx, "orders", 0)
	if err != nil || got.Version != 1 || !got.UpdatedAt.Equal(committed.UpdatedAt) {
		t.Fatalf("after commit Load = %+v, %v; want %+v", got, err, committed)
	}
	if n, _ := ledger.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("committed ledger insert not visible")
	}

	// A zombie's transaction (lower epoch) is fenced and must not commit.
	zombie := got
	zombie.Epoch = 1
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		if _, err := ledger.InsertOne(sctx, bson.D{{Key: "_id", Value: "event-2"}}); err != nil {
			return nil, err
		}
		return s.Save(sctx, zombie)
	})
	var fe *checkpoint.FenceError
	if !errors.As(err, &fe) || !fe.EpochLost() || fe.StoredEpoch != 2 {
		t.Fatalf("zombie transaction: err = %v, want an epoch-lost FenceError", err)
	}
	if n, _ := ledger.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("the fenced transaction's ledger insert committed")
	}

	// A first Save that finds a checkpoint already stored is fenced too; the
	// duplicate key aborts the transaction on the server.
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		return s.Save(sctx, sample(t, "orders", 0))
	})
	if !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("first Save in a transaction over a stored checkpoint: err = %v, want ErrFenced", err)
	}
	if got2, _ := s.Load(ctx, "orders", 0); got2.Version != 1 {
		t.Fatalf("fenced transactional Save changed the checkpoint to version %d", got2.Version)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := mongostore.New(nil); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Errorf("New(nil): err = %v, want ErrInvalid", err)
	}
	// No server is contacted: a database handle of an unconnected client is enough.
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	db := client.Database("x")
	for _, name := range []string{"", "a$b", "a\x00b", "system.views"} {
		if _, err := mongostore.New(db, mongostore.Collection(name)); !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("Collection(%q): err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := mongostore.New(db, nil); !errors.Is(err, checkpoint.ErrInvalid) || !strings.Contains(err.Error(), "nil option") {
		t.Errorf("a nil option: err = %v, want ErrInvalid naming the nil option", err)
	}
	if _, err := mongostore.New(db, mongostore.Collection(""), mongostore.Collection("ferry_checkpoints")); err != nil {
		t.Errorf("a valid collection name: %v", err)
	}
	for _, name := range []string{"", "a$b", "system.x", mongostore.DefaultCollection} {
		_, err := mongostore.New(db, mongostore.SnapshotsCollection(name))
		if !errors.Is(err, checkpoint.ErrInvalid) || !strings.Contains(err.Error(), "SnapshotsCollection") {
			t.Errorf("SnapshotsCollection(%q): err = %v, want ErrInvalid naming SnapshotsCollection", name, err)
		}
	}
	if _, err := mongostore.New(db, mongostore.Collection("snapshots")); !errors.Is(err, checkpoint.ErrInvalid) || !strings.Contains(err.Error(), "SnapshotsCollection") {
		t.Errorf("Collection(snapshots) beside the default snapshots collection: err = %v, want ErrInvalid naming SnapshotsCollection", err)
	}
	s, err := mongostore.New(db, mongostore.Collection("snapshots"), mongostore.SnapshotsCollection("requests"))
	if err != nil || s.Collection().Name() != "snapshots" || s.SnapshotsCollection().Name() != "requests" {
		t.Errorf("New with both collections named: %v", err)
	}
}
