package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/lease"
)

// TestStopReleasesAnAcquireWhoseAnswerWasLost: a member stopping (a
// graceful leave, a failed stream) frees a lease the server gave it though
// it never learnt so (the acquire was cut short by the end of Run), so the
// partition moves at once instead of after the lease's TTL (never, on a
// server whose clock stands still). Seen in TestGracefulLeaveTakeover under
// load: partition 2 stayed "a"'s at a new epoch after a's SIGTERM, a having
// printed no assignment of it. A lease an earlier process under the same
// member id holds (a partition this one never asked for) is left to expire.
func TestStopReleasesAnAcquireWhoseAnswerWasLost(t *testing.T) {
	uri, _ := emutest.URI(t, emutest.FrozenClock(time.Now()))
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	ctx := context.Background()
	state := client.Database(fmt.Sprintf("strays_%d", time.Now().UnixNano()))
	g, err := New(client, func(context.Context, *ferry.Event) error { return nil },
		Name("orders"), Partitions(3), MemberID("a"), StateDatabase(state), LeaseTTL(5*time.Second),
		ConsumerOptions(ferry.WatchCollection("db", "c")))
	if err != nil {
		t.Fatal(err)
	}
	// Partition 1: this process asked for it, and the server gave it (the
	// answer never came back). Partition 2: held under the same id by an
	// earlier process; this one never asked for it.
	g.tried[1], g.unsure[1] = true, true
	for _, p := range []int{1, 2} {
		if _, err := g.leases.Acquire(ctx, "orders", p, "a", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	g.stopAll(map[int]*running{})

	list, err := g.leases.List(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]lease.Lease{}
	for _, l := range list {
		got[l.Partition] = l
	}
	if l := got[1]; l.Owner != "" || l.Epoch != 1 {
		t.Errorf("partition 1 after stop: owner %q epoch %d, want free at epoch 1 (released, epoch kept)", l.Owner, l.Epoch)
	}
	if l := got[2]; l.Owner != "a" || l.Free() {
		t.Errorf("partition 2 after stop: owner %q free %v, want still the earlier process's", l.Owner, l.Free())
	}
}
