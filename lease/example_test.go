package lease_test

import (
	"context"
	"errors"
	"log"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/lease"
)

// One member holding partition 3 of group "orders", working while the lease
// is provably valid and stopping by itself when it is lost.
func Example() {
	ctx := context.Background()
	var client *mongo.Client // connected elsewhere
	store, err := lease.New(client.Database("ferry"))
	if err != nil {
		log.Fatal(err)
	}
	me, err := store.Join(ctx, "orders", lease.DefaultMemberID(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer me.Leave(context.Background())

	h, err := store.Hold(ctx, "orders", 3, me.ID(), 10*time.Second)
	var held *lease.HeldError
	if errors.As(err, &held) {
		log.Printf("partition 3 belongs to %s (epoch %d)", held.Current.Owner, held.Current.Epoch)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(context.Background())

	work, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		<-h.Done() // lost (or released): stop at once
		stop()
	}()
	_ = work // run the partition's consumer with ctx work and epoch h.Epoch()
}
