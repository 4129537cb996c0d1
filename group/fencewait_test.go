package group_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestTakeoverWaitIsVisible: a member killed between its fence write and
// its commit leaves its transaction open, and the next owner's takeover
// waits for it to end (up to transactionLifetimeLimitSeconds on a real
// server). The wait is logged while it lasts, and its end, instead of a
// partition that silently does nothing for a minute.
func TestTakeoverWaitIsVisible(t *testing.T) {
	defer group.SetFenceWaitNotice(group.SetFenceWaitNotice(100 * time.Millisecond))
	e := newFenv(t)
	ctx := context.Background()
	fences := e.state.Collection("fences")
	_ = e.state.CreateCollection(ctx, "fences")
	// The dead owner's open transaction, holding partition 0's first fence.
	sess, err := e.client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(ctx, sess)
	id := bson.D{{Key: "group", Value: "s"}, {Key: "partition", Value: 0}, {Key: "slot", Value: 0}}
	if _, err := fences.UpdateOne(sctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "epoch", Value: int64(0)}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	m := e.joinWith("next", 1, []group.Option{
		group.DeliveryMode(group.Transactional),
		group.Logger(slog.New(slog.NewTextHandler(&log, nil))),
	})
	poll.Until(t, 20*time.Second, func() error {
		if !strings.Contains(log.String(), "partition takeover waits for an earlier owner's open transaction") {
			return fmt.Errorf("no log line about the wait:\n%s", log.String())
		}
		return nil
	})
	if _, err := e.source.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: int32(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := sess.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, func() error {
		if m.count(1) != 1 || !strings.Contains(log.String(), "the earlier owner's transaction ended") {
			return fmt.Errorf("delivered %d times; log:\n%s", m.count(1), log.String())
		}
		return nil
	})
}
