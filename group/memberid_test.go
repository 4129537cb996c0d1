package group_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/lease"
)

// assignment is one OnAssigned call.
type assignment struct {
	partition int
	epoch     int64
}

// idMember starts a group member "m1" of stream "orders" with its own
// client; its assignments arrive on the returned channel, Run's result on
// done.
func idMember(t *testing.T, c *cluster, partitions int) (g *group.Group, assigned <-chan assignment, done <-chan error, stop func()) {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan assignment, 64)
	g, err = group.New(client, c.handler,
		group.Name("orders"), group.Partitions(partitions), group.MemberID("m1"), group.StateDatabase(client.Database(c.state.Name())),
		group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
		group.LeaseOptions(lease.HeartbeatInterval(200*time.Millisecond)),
		group.OnAssigned(func(p int, epoch int64) { ch <- assignment{p, epoch} }),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.MaxAwaitTime(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.Run(ctx); _ = client.Disconnect(context.Background()) }()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("member m1: Run = %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("member m1 did not stop within 20 s")
		}
	}
	t.Cleanup(stop)
	return g, ch, errc, stop
}

// TestDuplicateMemberIDRefused: a second member with the MemberID of a
// live one does not join: its Run returns an error matching
// lease.ErrDuplicateMember, naming the id, while the first keeps its
// partitions at the same epochs. (Before, the two replaced each other's
// registration at every heartbeat, each taking the partitions over.)
func TestDuplicateMemberIDRefused(t *testing.T) {
	c := newCluster(t)
	first, assigned, _, _ := idMember(t, c, 2)
	for range 2 {
		select {
		case <-assigned:
		case <-time.After(30 * time.Second):
			t.Fatal("the first member did not take both partitions")
		}
	}
	before := first.Owned()

	client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	second, err := group.New(client, c.handler,
		group.Name("orders"), group.Partitions(2), group.MemberID("m1"), group.StateDatabase(client.Database(c.state.Name())),
		group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
		group.LeaseOptions(lease.HeartbeatInterval(200*time.Millisecond)),
		group.OnAssigned(func(p int, epoch int64) { t.Errorf("the second member took partition %d (epoch %d)", p, epoch) }),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.MaxAwaitTime(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = second.Run(ctx)
	var dup *lease.DuplicateMemberError
	if !errors.Is(err, lease.ErrDuplicateMember) || !errors.As(err, &dup) || dup.Member != "m1" ||
		!strings.Contains(err.Error(), "MemberID") {
		t.Fatalf("second member's Run = %v; want ErrDuplicateMember naming m1 and MemberID", err)
	}
	if st := second.Status(); st.State != group.Stopped || !strings.Contains(st.LastError, "another live process") {
		t.Errorf("second member's status = %s (%q), want stopped with the reason", st.State, st.LastError)
	}
	// The first member is undisturbed: same partitions, same epochs, and
	// it still delivers.
	if got := first.Owned(); len(got) != 2 || got[0] != before[0] || got[1] != before[1] {
		t.Fatalf("first member owns %v after the second was refused, before %v", got, before)
	}
	for i := range 20 {
		if _, err := c.source.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		if n := c.nApplied(); n != 20 {
			return fmt.Errorf("%d of 20 events applied", n)
		}
		return nil
	})
	if got := first.Owned(); got[0] != before[0] || got[1] != before[1] {
		t.Fatalf("first member's epochs moved: %v, before %v", got, before)
	}
}

// TestRestartedMemberTakesLeasesAtNewEpoch: a member restarted under the
// id of one that crashed joins once the crashed registration expires, but
// does not adopt the leases the crashed process still holds under that id
// (that would share their epoch with it): it takes each when it expires,
// at a new epoch.
func TestRestartedMemberTakesLeasesAtNewEpoch(t *testing.T) {
	uri, srv := emutest.URI(t)
	c := newClusterOn(t, uri)
	ls, err := lease.New(c.state, lease.MemberTimeout(2*time.Second), lease.HeartbeatInterval(200*time.Millisecond),
		lease.WithClock(stoppedClock{}))
	if err != nil {
		t.Fatal(err)
	}
	// The crashed process: registered (its heartbeats stopped) and holding
	// partition 0's lease for a long time.
	crashed, err := ls.Join(context.Background(), "orders", "m1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crashed.Leave(context.Background()) })
	old, err := ls.Acquire(context.Background(), "orders", 0, "m1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	_, assigned, _, _ := idMember(t, c, 2)
	// Partition 1 is free: the restarted member takes it in its first
	// reconcile, which looks at partition 0 first.
	first := <-waitAssignment(t, assigned)
	if first.partition != 1 {
		t.Fatalf("the restarted member took partition %d at epoch %d (the crashed one's live lease at epoch %d); want partition 1 first",
			first.partition, first.epoch, old.Epoch)
	}
	// The crashed process's lease expires by the server's clock.
	srv.AdvanceClock(time.Hour)
	for a := range assignedUntil(t, assigned, 0) {
		if a.partition == 0 && a.epoch <= old.Epoch {
			t.Fatalf("partition 0 taken at epoch %d, the crashed process's epoch %d", a.epoch, old.Epoch)
		}
	}
	l, err := ls.Get(context.Background(), "orders", 0)
	if err != nil || l.Owner != "m1" || l.Epoch != old.Epoch+1 {
		t.Fatalf("partition 0's lease = %+v, %v; want m1 at epoch %d", l, err, old.Epoch+1)
	}
}

// waitAssignment returns a channel with the next assignment (within 30 s).
func waitAssignment(t *testing.T, assigned <-chan assignment) <-chan assignment {
	t.Helper()
	select {
	case a := <-assigned:
		out := make(chan assignment, 1)
		out <- a
		return out
	case <-time.After(30 * time.Second):
		t.Fatal("no partition assigned within 30 s")
		return nil
	}
}

// assignedUntil yields assignments until partition p is assigned (within
// 30 s).
func assignedUntil(t *testing.T, assigned <-chan assignment, p int) func(func(assignment) bool) {
	return func(yield func(assignment) bool) {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case a := <-assigned:
				if !yield(a) || a.partition == p {
					return
				}
			case <-deadline:
				t.Fatalf("partition %d not assigned within 30 s", p)
				return
			}
		}
	}
}

// stoppedClock is the clock of a process that crashed: its timers never
// fire, so its member stops heartbeating.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time                       { return time.Now() }
func (stoppedClock) After(time.Duration) <-chan time.Time { return nil }
