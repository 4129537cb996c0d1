package group_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/lease"
)

// cluster is one test's MongoDB and the members started on it.
type cluster struct {
	t       *testing.T
	uri     string
	source  *mongo.Database
	state   *mongo.Database
	client  *mongo.Client
	mu      sync.Mutex
	applied map[string]int // event id → effects
	members map[string]*member
}

type member struct {
	g      *group.Group
	cancel context.CancelFunc
	done   chan error
}

func newCluster(t *testing.T) *cluster {
	uri, _ := emutest.URI(t)
	return newClusterOn(t, uri)
}

// newFrozenCluster is newCluster on an emulator whose clock stands still:
// no lease and no membership can expire, so a partition changes hands only
// when its owner releases it. A test of a graceful hand-off asserts that it
// happened at all, instead of timing it against the lease TTL.
func newFrozenCluster(t *testing.T) *cluster {
	uri, _ := emutest.URI(t, emutest.FrozenClock(time.Now()))
	return newClusterOn(t, uri)
}

func newClusterOn(t *testing.T, uri string) *cluster {
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	name := fmt.Sprintf("grp_%d", time.Now().UnixNano())
	return &cluster{t: t, uri: uri, client: client, source: client.Database(name), state: client.Database(name + "_state"),
		applied: map[string]int{}, members: map[string]*member{}}
}

func (c *cluster) handler(_ context.Context, ev *ferry.Event) error {
	c.mu.Lock()
	c.applied[ev.ID()]++
	c.mu.Unlock()
	return nil
}

func (c *cluster) join(id string, partitions int) { c.joinWith(id, partitions) }

func (c *cluster) joinWith(id string, partitions int, extra ...lease.Option) {
	c.joinWithLost(id, partitions, nil, extra...)
}

func (c *cluster) joinWithLost(id string, partitions int, onLost func(int, error), extra ...lease.Option) {
	c.t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
	if err != nil {
		c.t.Fatal(err)
	}
	g, err := group.New(client, c.handler,
		group.Name("orders"), group.Partitions(partitions), group.MemberID(id), group.StateDatabase(client.Database(c.state.Name())),
		group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
		group.LeaseOptions(append([]lease.Option{lease.MemberTimeout(2 * time.Second), lease.HeartbeatInterval(200 * time.Millisecond)}, extra...)...),
		group.OnLost(func(p int, err error) {
			if onLost != nil {
				onLost(p, err)
			}
		}),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.MaxAwaitTime(50*time.Millisecond),
			ferry.CommitEvery(10, 20*time.Millisecond)))
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{g: g, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- g.Run(ctx); _ = client.Disconnect(context.Background()) }()
	c.mu.Lock()
	c.members[id] = m
	c.mu.Unlock()
	c.t.Cleanup(func() { c.leave(id) })
}

func (c *cluster) leave(id string) {
	c.mu.Lock()
	m := c.members[id]
	delete(c.members, id)
	c.mu.Unlock()
	if m == nil {
		return
	}
	m.cancel()
	if err := <-m.done; err != nil {
		c.t.Errorf("member %s: %v", id, err)
	}
}

// owners returns partition → members running it, sampled now.
func (c *cluster) owners() map[int][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int][]string{}
	for id, m := range c.members {
		for p := range m.g.Owned() {
			out[p] = append(out[p], id)
		}
	}
	return out
}

// settle waits until every partition runs on exactly one member and loads
// are balanced within one, checking at every sample that no partition runs
// twice.
func (c *cluster) settle(partitions int) map[int]string {
	c.t.Helper()
	out := map[int]string{}
	poll.Until(c.t, 30*time.Second, func() error {
		own := c.owners()
		for p, ms := range own {
			if len(ms) > 1 {
				c.t.Fatalf("partition %d runs on %v at once", p, ms)
			}
		}
		if len(own) == partitions {
			loads := map[string]int{}
			for _, ms := range own {
				loads[ms[0]]++
			}
			c.mu.Lock()
			n := len(c.members)
			c.mu.Unlock()
			lo, hi := partitions, 0
			for id := range c.members {
				lo, hi = min(lo, loads[id]), max(hi, loads[id])
			}
			if len(loads) == min(n, partitions) && hi-lo <= 1 {
				for p, ms := range own {
					out[p] = ms[0]
				}
				return nil
			}
		}
		return fmt.Errorf("no stable balanced assignment: %v", own)
	})
	return out
}

// nApplied is how many distinct events the members applied.
func (c *cluster) nApplied() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.applied)
}

func TestGroupSharesPartitions(t *testing.T) {
	c := newFrozenCluster(t)
	const partitions = 8
	for i := range 3 {
		c.join(fmt.Sprintf("m%d", i), partitions)
	}
	before := c.settle(partitions)
	// Writes spread over the partitions: each effect happens once.
	ctx := context.Background()
	for i := range 200 {
		if _, err := c.source.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		if n := c.nApplied(); n != 200 {
			return fmt.Errorf("%d of 200 events applied", n)
		}
		return nil
	})
	c.mu.Lock()
	for id, k := range c.applied {
		if k != 1 {
			t.Fatalf("event %s applied %d times", id[:12], k)
		}
	}
	c.mu.Unlock()
	// A fourth member takes only its share.
	c.join("m3", partitions)
	after := c.settle(partitions)
	moved := movedTo(before, after)
	if moved["m3"] != 2 || len(moved) != 1 {
		t.Fatalf("after a join, moves by new owner = %v; want exactly 2 partitions, all to m3", moved)
	}
	// It leaves again: only its partitions move, and they are released,
	// not expired: the server's clock stands still (newFrozenCluster), so
	// m3's leases never expire and settle finds them taken over only if
	// m3 released them. (This used to assert the takeover took at most
	// 2 s of wall-clock time, which a loaded machine can exceed.)
	start := time.Now()
	c.leave("m3")
	back := c.settle(partitions)
	for p, owner := range back {
		if after[p] != owner && after[p] != "m3" {
			t.Fatalf("partition %d of a staying member moved on a leave", p)
		}
	}
	t.Logf("takeover after a graceful leave: %v (the server's clock stood still)", time.Since(start))
}

func movedTo(before, after map[int]string) map[string]int {
	out := map[string]int{}
	var ps []int
	for p := range after {
		ps = append(ps, p)
	}
	sort.Ints(ps)
	for _, p := range ps {
		if before[p] != after[p] {
			out[after[p]]++
		}
	}
	return out
}

// TestDeliveryModesAbsorbReplays replays a whole stream (its checkpoints
// deleted) through idempotent and transactional members: the ledger keeps
// every effect single.
func TestDeliveryModesAbsorbReplays(t *testing.T) {
	for _, mode := range []group.Mode{group.Idempotent, group.Transactional} {
		t.Run(string(mode), func(t *testing.T) {
			c := newCluster(t)
			ctx := context.Background()
			sess, err := c.client.StartSession()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.client.Database("admin").RunCommand(mongo.NewSessionContext(ctx, sess), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
				t.Fatal(err)
			}
			at := *sess.OperationTime()
			sess.EndSession(ctx)
			effects := c.state.Collection("effects")
			// Collections used inside transactions exist beforehand.
			_ = c.state.CreateCollection(ctx, "effects")
			for i := range 40 {
				if _, err := c.source.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
					t.Fatal(err)
				}
			}
			// The token of the last event: a run is done when every
			// partition's checkpoint is at or past it.
			cs, err := c.source.Collection("c").Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(&at))
			if err != nil {
				t.Fatal(err)
			}
			var last string
			for range 40 {
				if !cs.Next(ctx) {
					t.Fatal(cs.Err())
				}
				last = cs.Current.Lookup("_id", "_data").StringValue()
			}
			cs.Close(ctx)
			runOnce := func() int64 {
				client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
				if err != nil {
					t.Fatal(err)
				}
				defer client.Disconnect(ctx)
				// In transactional mode the handler writes through the
				// context it is given, with the group's own client.
				mine := client.Database(c.state.Name()).Collection("effects")
				effect := func(ctx context.Context, ev *ferry.Event) error {
					_, err := mine.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}, {Key: "epoch", Value: ev.Epoch}})
					return err
				}
				g, err := group.New(client, effect, group.Name("orders"), group.Partitions(2), group.MemberID("solo"),
					group.StateDatabase(client.Database(c.state.Name())), group.DeliveryMode(mode),
					group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
					group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.StartAt(ferry.StartAtTime(at)),
						ferry.MaxAwaitTime(50*time.Millisecond)))
				if err != nil {
					t.Fatal(err)
				}
				rctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- g.Run(rctx) }()
				poll.Until(t, 30*time.Second, func() error {
					past := 0
					cur, err := c.state.Collection("checkpoints").Find(ctx, bson.D{})
					if err != nil {
						t.Fatal(err)
					}
					for cur.Next(ctx) {
						var cp struct {
							Token []byte `bson:"token"`
						}
						if cur.Decode(&cp) == nil && len(cp.Token) > 0 && bson.Raw(cp.Token).Lookup("_data").StringValue() >= last {
							past++
						}
					}
					if past != 2 {
						return fmt.Errorf("%d of 2 partitions checkpointed past the last event", past)
					}
					return nil
				})
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return g.LedgerDuplicates()
			}
			if d := runOnce(); d != 0 {
				t.Fatalf("first run: %d ledger duplicates, want 0", d)
			}
			// Forget every position: the next run replays all 40 events.
			if _, err := c.state.Collection("checkpoints").DeleteMany(ctx, bson.D{}); err != nil {
				t.Fatal(err)
			}
			if d := runOnce(); d != 40 {
				t.Fatalf("replay: %d ledger duplicates, want 40", d)
			}
			n, err := effects.CountDocuments(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			if n != 40 {
				t.Fatalf("%s mode: %d effects for 40 events after a full replay, want 40", mode, n)
			}
		})
	}
}

// TestRepartition goes from 2 to 3 partitions with the group stopped: no
// event is skipped, replays are absorbed by the ledger.
func TestRepartition(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	run := func(partitions int, want int) {
		client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
		if err != nil {
			t.Fatal(err)
		}
		defer client.Disconnect(ctx)
		effects := client.Database(c.state.Name()).Collection("effects")
		g, err := group.New(client, func(ctx context.Context, ev *ferry.Event) error {
			_, err := effects.InsertOne(ctx, bson.D{{Key: "event", Value: ev.ID()}})
			return err
		}, group.Name("orders"), group.Partitions(partitions), group.MemberID("solo"),
			group.StateDatabase(client.Database(c.state.Name())), group.DeliveryMode(group.Idempotent),
			group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
			group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.MaxAwaitTime(50*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- g.Run(rctx) }()
		poll.Until(t, 30*time.Second, func() error {
			if owned := g.Owned(); len(owned) < partitions {
				return fmt.Errorf("partitions not started: %v", owned)
			}
			return nil
		})
		// Partition consumers have checkpointed their start.
		poll.Until(t, 30*time.Second, func() error {
			n, err := c.state.Collection("checkpoints").CountDocuments(ctx, bson.D{{Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
			if err != nil {
				return err
			}
			if int(n) < partitions {
				return fmt.Errorf("%d of %d partitions checkpointed their start", n, partitions)
			}
			return nil
		})
		for i := want - 20; i < want; i++ {
			if _, err := c.source.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
				t.Fatal(err)
			}
		}
		poll.Until(t, 30*time.Second, func() error {
			n, err := effects.CountDocuments(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			if int(n) > want {
				t.Fatalf("%d effects, want %d: a replay was not absorbed", n, want)
			}
			if int(n) != want {
				return fmt.Errorf("%d effects, want %d", n, want)
			}
			return nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	run(2, 20)
	if err := group.Repartition(ctx, c.state, "orders", 3); err != nil {
		t.Fatal(err)
	}
	run(3, 40)
	n, _ := c.state.Collection("effects").CountDocuments(ctx, bson.D{})
	if n != 40 {
		t.Fatalf("%d effects after repartitioning, want 40", n)
	}
}

// skewed is a lease clock shifted by a fixed offset (a member whose local
// clock is wrong by minutes).
type skewed struct{ off time.Duration }

func (s skewed) Now() time.Time                         { return time.Now().Add(s.off) }
func (s skewed) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestSkewedClocksNeverShareAPartition runs members whose local clocks
// differ by minutes: leases are judged by the server's clock and validity
// by elapsed time, so no partition ever runs on two members.
func TestSkewedClocksNeverShareAPartition(t *testing.T) {
	c := newCluster(t)
	const partitions = 6
	for i, off := range []time.Duration{-7 * time.Minute, 0, 9 * time.Minute} {
		c.joinWith(fmt.Sprintf("skew%d", i), partitions, lease.WithClock(skewed{off}))
	}
	c.settle(partitions)
	c.leave("skew1")
	c.settle(partitions)
	c.joinWith("late", partitions, lease.WithClock(skewed{-30 * time.Minute}))
	c.settle(partitions)
}

// TestQuietPartitionsKeepTheirPlace writes only to documents of partition 0
// while the oplog rolls over many times: the quiet partitions' checkpoints
// advance with the server's postBatchResumeToken, so a restart resumes every
// partition without ChangeStreamHistoryLost.
//
// Every wait is on the checkpoints' resume tokens, not on time: the writes
// go in steps that every partition's checkpoint passes before the next (a
// writer outrunning a reader would make it lose history, which is not what
// this test is about), and after the restart the first writes are one per
// partition, applied before the rest, so each partition has resumed from
// its checkpoint before more writes could push that off the oplog. (It used
// to wait for partition 0 alone and for checkpoints written after the
// writes by the server's clock, which a commit of a position read before
// the last writes also passes; and to write 50 documents at once after
// the restart: on a loaded machine a partition could open its stream only
// after they had rolled its checkpoint off the 60-entry oplog.)
func TestQuietPartitionsKeepTheirPlace(t *testing.T) {
	srv := emutest.New(t, emutest.OplogMaxEntries(60))
	c := newClusterOn(t, srv.URI())
	const partitions = 4
	c.join("q", partitions)
	c.settle(partitions)
	// _ids that hash to partition 0.
	ids := idsOf(0, partitions, 0, 150)
	// 150 inserts in steps of 20 roll the 60-entry oplog over more than
	// twice.
	for i, id := range ids {
		if _, err := c.source.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
		if (i+1)%20 != 0 && i+1 != len(ids) {
			continue
		}
		c.waitApplied(i + 1)
		c.waitCheckpointsPast(partitions, c.opTime(t))
	}
	c.leave("q")
	var mu sync.Mutex
	var stops []string
	c.joinWithLost("q2", partitions, func(p int, err error) {
		// A partition stopped and is restarted after a backoff (a lease
		// lost on a starved machine, say): logged, not a failure — lost
		// history would fail the stream instead (HistoryLostFail).
		mu.Lock()
		stops = append(stops, fmt.Sprintf("partition %d: %v", p, err))
		mu.Unlock()
	})
	c.settle(partitions)
	c.mu.Lock()
	q2 := c.members["q2"].g
	c.mu.Unlock()
	notFailed := func() {
		if st := q2.Status(); st.State == group.Failed {
			t.Fatalf("the stream failed after the restart (its position fell off the oplog?): partition %d: %+v", st.FailedPartition, st.Failure)
		}
	}
	// One document per partition, each applied: every partition resumed
	// from its checkpoint.
	for p := range partitions {
		if _, err := c.source.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: idsOf(p, partitions, 1_000_000, 1)[0]}}); err != nil {
			t.Fatal(err)
		}
	}
	c.waitAppliedWhile(len(ids)+partitions, notFailed)
	for i := range 46 {
		if _, err := c.source.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: fmt.Sprint("after-", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	c.waitAppliedWhile(len(ids)+partitions+46, notFailed)
	mu.Lock()
	defer mu.Unlock()
	if len(stops) > 0 {
		t.Logf("partitions stopped and restarted after the restart: %v", stops)
	}
}

// idsOf returns n int32 _ids from from on that fall in partition p of
// partitions (under HashRange, a new stream's partitioning, as the
// consumer's filter computes it).
func idsOf(p, partitions int, from int32, n int) []int32 {
	var ids []int32
	for i := from; len(ids) < n; i++ {
		h, _ := hashkey.Hash(i)
		if ferry.InPartition(ferry.HashRange, h, p, partitions) {
			ids = append(ids, i)
		}
	}
	return ids
}

// waitApplied waits until n distinct events have been applied.
func (c *cluster) waitApplied(n int) { c.waitAppliedWhile(n, func() {}) }

// waitAppliedWhile is waitApplied calling check at every look.
func (c *cluster) waitAppliedWhile(n int, check func()) {
	c.t.Helper()
	poll.Until(c.t, 30*time.Second, func() error {
		check()
		if got := c.nApplied(); got != n {
			return fmt.Errorf("%d of %d events applied", got, n)
		}
		return nil
	})
}

// waitCheckpointsPast waits until the checkpoint of every partition of
// stream "orders" holds a resume token at cluster time ts or later.
func (c *cluster) waitCheckpointsPast(partitions int, ts bson.Timestamp) {
	c.t.Helper()
	store, err := mongostore.New(c.state)
	if err != nil {
		c.t.Fatal(err)
	}
	poll.Until(c.t, 30*time.Second, func() error {
		for p := range partitions {
			cp, err := store.Load(context.Background(), "orders", p)
			if err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
			if cp.Token == nil {
				return fmt.Errorf("partition %d has no position yet", p)
			}
			tok, err := resumetoken.Parse(cp.Token)
			if err != nil {
				c.t.Fatalf("partition %d: checkpoint token: %v", p, err)
			}
			if tok.ClusterTime.Compare(ts) < 0 {
				return fmt.Errorf("partition %d's checkpoint is at %v, not yet at %v (a quiet partition checkpoints the server's postBatchResumeToken)", p, tok.ClusterTime, ts)
			}
		}
		return nil
	})
}

// TestSweeperPerPartition: each partition's backfill calls the sweeper made
// for that partition (a shared one would not know which partition it
// sweeps), after its scan.
func TestSweeperPerPartition(t *testing.T) {
	c := newCluster(t)
	const partitions = 3
	ctx := context.Background()
	for i := range 30 {
		if _, err := c.source.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	swept := map[int]int{} // partition → sweeps
	scanned := 0           // backfill events applied when the last sweep began
	made := 0
	g, err := group.New(c.client, c.handler,
		group.Name("orders"), group.Partitions(partitions), group.MemberID("solo"), group.StateDatabase(c.state),
		group.LeaseTTL(2*time.Second), group.RebalanceInterval(50*time.Millisecond),
		group.Sweeper(func(scheme ferry.Partitioning, p, n int) ferry.Sweeper {
			mu.Lock()
			made++
			mu.Unlock()
			if n != partitions || scheme != ferry.HashRange {
				t.Errorf("sweeper made for partition %d of %d under %q, want of %d under hash-range", p, n, scheme, partitions)
			}
			return func(context.Context, time.Time) error {
				c.mu.Lock()
				applied := len(c.applied)
				c.mu.Unlock()
				mu.Lock()
				swept[p]++
				scanned = applied
				mu.Unlock()
				return nil
			}
		}),
		group.ConsumerOptions(ferry.WatchCollection(c.source.Name(), "c"), ferry.MaxAwaitTime(50*time.Millisecond),
			ferry.StartAt(ferry.StartWithBackfill())))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(rctx) }()
	poll.Until(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(swept) != partitions {
			return fmt.Errorf("swept partitions %v, want all %d", swept, partitions)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for p, k := range swept {
		if k != 1 {
			t.Errorf("partition %d swept %d times, want once", p, k)
		}
	}
	if made != partitions {
		t.Errorf("%d sweepers made, want one per partition (%d)", made, partitions)
	}
	if scanned != 30 {
		t.Errorf("%d documents backfilled before the last sweep, want all 30", scanned)
	}
}

// TestGroupOriginCoversLateStart holds two partitions' leases outside the
// group while a new group starts and events are written, so those
// partitions first open their streams only after the writes. They still
// deliver every event written after the group started: every partition
// starts at the group's common origin, not at its own first open.
func TestGroupOriginCoversLateStart(t *testing.T) {
	c := newCluster(t)
	const partitions = 4
	ctx := context.Background()
	ls, err := lease.New(c.state)
	if err != nil {
		t.Fatal(err)
	}
	var blocked []*lease.Held
	for _, p := range []int{1, 3} {
		h, err := ls.Hold(ctx, "orders", p, "outsider", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		blocked = append(blocked, h)
	}
	c.join("m0", partitions)
	// The member runs the two free partitions, whose streams are open
	// (their start is recorded as a token).
	poll.Until(t, 30*time.Second, func() error {
		n, err := c.state.Collection("checkpoints").CountDocuments(ctx, bson.D{{Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		if err != nil {
			t.Fatal(err)
		}
		if owned := c.members["m0"].g.Owned(); n != 2 || len(owned) != 2 {
			return fmt.Errorf("%d checkpoints, owned %v", n, owned)
		}
		return nil
	})
	const writes = 80
	for i := range writes {
		if _, err := c.source.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range blocked {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 30*time.Second, func() error {
		if n := c.nApplied(); n != writes {
			return fmt.Errorf("%d of %d events applied: partitions that opened late missed the writes before their first open", n, writes)
		}
		return nil
	})
	if owned := c.members["m0"].g.Owned(); len(owned) != partitions {
		t.Errorf("m0 owns %v, want all %d partitions", owned, partitions)
	}
}
