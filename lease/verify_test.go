package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/lease"
)

// inTxn runs fn in a transaction on client: an effect (an insert into
// effects) and then fn's verdict; an error aborts both.
func inTxn(t *testing.T, client *mongo.Client, effects *mongo.Collection, id string, fn func(sctx context.Context) error) error {
	t.Helper()
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	_, err = sess.WithTransaction(ctx(t), func(sctx context.Context) (any, error) {
		if _, err := effects.InsertOne(sctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			return nil, err
		}
		return nil, fn(sctx)
	})
	return err
}

// TestVerifyEpochInTransaction: a holder whose lease another member took
// over is refused inside a transaction, even while its local clock still
// calls the lease valid (a paused zombie), and its transaction's effect is
// aborted; the new holder's passes and commits. The read joins the
// transaction's snapshot: a takeover committed after the snapshot is not
// seen there, and is seen by the next transaction.
func TestVerifyEpochInTransaction(t *testing.T) {
	e, clk, _, _ := heldEnv(t, "clock control (AdvanceClock)", "", "")
	// One client for the stores and the transactions: a session belongs
	// to the client that started it.
	client := e.client(t, "", nil)
	s, other, third := e.storeOn(t, client, lease.WithClock(clk)), e.storeOn(t, client), e.storeOn(t, client)
	effects := client.Database(e.db.Name()).Collection("effects")
	if err := client.Database(e.db.Name()).CreateCollection(ctx(t), "effects"); err != nil {
		t.Fatal(err)
	}
	a := hold(t, s, 0, "a")
	if err := inTxn(t, client, effects, "a1", a.VerifyEpoch); err != nil {
		t.Fatalf("the holder's own epoch in a transaction: %v", err)
	}

	// The server's clock passes the TTL: b takes the partition over at
	// epoch 2. a's local clock stands still, so a still calls it valid.
	e.srv.AdvanceClock(hTTL + time.Millisecond)
	b, err := other.Hold(ctx(t), "g", 0, "b", hTTL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Release(context.Background()) })
	if b.Epoch() != 2 || !a.Valid() {
		t.Fatalf("b epoch %d, a valid %v: want a takeover at epoch 2 that a does not know of", b.Epoch(), a.Valid())
	}
	err = inTxn(t, client, effects, "a2", a.VerifyEpoch)
	if !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), `owner "b" holds it at epoch 2`) || !strings.Contains(err.Error(), `"a" no longer holds epoch 1`) {
		t.Fatalf("the stale holder in a transaction: %v, want ErrLost naming b at epoch 2", err)
	}
	if err := inTxn(t, client, effects, "b1", b.VerifyEpoch); err != nil {
		t.Fatalf("the new holder in a transaction: %v", err)
	}
	for id, want := range map[string]int64{"a1": 1, "a2": 0, "b1": 1} {
		if n, err := effects.CountDocuments(ctx(t), bson.D{{Key: "_id", Value: id}}); err != nil || n != want {
			t.Errorf("effect %s: %d documents (%v), want %d", id, n, err, want)
		}
	}

	// Snapshot: b's transaction reads before c's takeover commits, and its
	// check afterwards still sees b's epoch; the next transaction sees c.
	err = inTxn(t, client, effects, "b2", func(sctx context.Context) error {
		e.srv.AdvanceClock(hTTL + time.Millisecond)
		c, err := third.Hold(context.Background(), "g", 0, "c", hTTL)
		if err != nil {
			return err
		}
		t.Cleanup(func() { _ = c.Release(context.Background()) })
		return b.VerifyEpoch(sctx)
	})
	if err != nil {
		t.Fatalf("a takeover after the transaction's snapshot: %v, want it unseen there", err)
	}
	if err := b.VerifyEpoch(ctx(t)); !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), `owner "c" holds it at epoch 3`) {
		t.Fatalf("after the takeover: %v, want ErrLost naming c at epoch 3", err)
	}
}
