package group_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
)

// fmember is one group member of the failed-state tests.
type fmember struct {
	g      *group.Group
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	states  []group.State
	applied map[int32]int
}

type fenv struct {
	t      *testing.T
	srv    *emutest.Server
	client *mongo.Client
	source *mongo.Database
	state  *mongo.Database
}

func newFenv(t *testing.T) *fenv {
	t.Helper()
	client, srv := emutest.Client(t)
	name := fmt.Sprintf("fail_%d", time.Now().UnixNano())
	return &fenv{t: t, srv: srv, client: client, source: client.Database(name), state: client.Database(name + "_state")}
}

// join starts a member of stream "s" with the given consumer options.
func (e *fenv) join(id string, partitions int, copts ...ferry.Option) *fmember {
	e.t.Helper()
	return e.joinWith(id, partitions, nil, copts...)
}

// joinWith is join with group options added.
func (e *fenv) joinWith(id string, partitions int, gopts []group.Option, copts ...ferry.Option) *fmember {
	e.t.Helper()
	m := &fmember{applied: map[int32]int{}, done: make(chan error, 1)}
	opts := append([]group.Option{
		group.Name("s"), group.Partitions(partitions), group.MemberID(id), group.StateDatabase(e.state),
		group.LeaseTTL(time.Second),
		group.OnStateChange(func(s group.Status) {
			m.mu.Lock()
			m.states = append(m.states, s.State)
			m.mu.Unlock()
		}),
		group.ConsumerOptions(append([]ferry.Option{ferry.WatchCollection(e.source.Name(), "c"), ferry.MaxAwaitTime(50 * time.Millisecond),
			ferry.CommitEvery(1, 20*time.Millisecond)}, copts...)...),
	}, gopts...)
	g, err := group.New(e.client, func(_ context.Context, ev *ferry.Event) error {
		m.mu.Lock()
		if v, ok := ev.DocumentKey.Lookup("_id").Int32OK(); ok {
			m.applied[v]++
		}
		m.mu.Unlock()
		return nil
	}, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	m.g = g
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- g.Run(ctx) }()
	e.t.Cleanup(m.stop)
	return m
}

func (m *fmember) stop() {
	m.cancel()
	<-m.done
	m.done <- nil
}

func (m *fmember) count(id int32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied[id]
}

// waitState waits until the member's status satisfies ok.
func waitState(t *testing.T, m *fmember, what string, ok func(group.Status) bool) group.Status {
	t.Helper()
	var s group.Status
	poll.Until(t, 20*time.Second, func() error {
		if s = m.g.Status(); !ok(s) {
			return fmt.Errorf("member never %s: status %+v", what, s)
		}
		return nil
	})
	return s
}

// waitApplied waits until the member applied the event of document id.
func waitApplied(t *testing.T, m *fmember, id int32, what string) {
	t.Helper()
	poll.Until(t, 20*time.Second, func() error {
		if m.count(id) == 0 {
			return fmt.Errorf("document %d %s", id, what)
		}
		return nil
	})
}

// epochs returns the sum of the stream's lease epochs: every new tenure
// adds one.
func (e *fenv) epochs() int64 {
	e.t.Helper()
	cur, err := e.state.Collection("leases").Find(context.Background(), bson.D{{Key: "group", Value: "s"}})
	if err != nil {
		e.t.Fatal(err)
	}
	var docs []struct {
		Epoch int64   `bson:"epoch"`
		Owner *string `bson:"owner"`
	}
	if err := cur.All(context.Background(), &docs); err != nil {
		e.t.Fatal(err)
	}
	var sum int64
	for _, d := range docs {
		sum += d.Epoch
	}
	return sum
}

// TestFailedStreamStopsAndSaysSo: a member whose definition differs from
// the checkpoints' (a changed pipeline) fails: it releases the stream's
// leases, records why in the state store, and takes no lease again — the
// epochs stop growing (before the failed state, the member re-acquired the
// partition in a tight loop: 1,086 acquisitions in 7 s). Once Status says
// Failed, the record is in the state store: the first write of the record
// is held up by the server here, and Status used to say Failed before it
// was written (the test, reading the records at once, found none: a flake
// under load before the fail point made it certain).
func TestFailedStreamStopsAndSaysSo(t *testing.T) {
	e := newFenv(t)
	const partitions = 2
	a := e.join("a", partitions)
	waitState(t, a, "ran both partitions", func(s group.Status) bool { return len(s.Partitions) == partitions })
	e.waitClaimed(partitions) // the checkpoints carry a's definition
	a.stop()

	e.srv.FailCommand(emutest.FailPoint{Commands: []string{"findAndModify"}, Times: 1, BlockFor: 300 * time.Millisecond,
		Namespace: e.state.Name() + "." + group.FailuresCollection})
	t.Cleanup(e.srv.ClearFailPoints)
	b := e.join("b", partitions, ferry.Pipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}))
	s := waitState(t, b, "failed", func(s group.Status) bool { return s.State == group.Failed })
	if s.Failure == nil || s.Failure.Class != ferry.FailIdentityChanged || s.Failure.Clears || !s.RetryAt.IsZero() {
		t.Fatalf("status %+v: want an identity-changed failure that is never re-checked", s)
	}
	if len(b.g.Owned()) != 0 {
		t.Fatalf("a failed member still owns %v", b.g.Owned())
	}
	recs := failureRecords(t, e)
	if len(recs) != 1 || recs[0].Member != "b" || recs[0].Class != string(ferry.FailIdentityChanged) || recs[0].Message == "" {
		t.Fatalf("failure records %+v: want b's identity-changed record", recs)
	}
	// Until the record has been refreshed (the failed loop ran on), no
	// lease was taken again.
	before := e.epochs()
	first := recs[0].UpdatedAt
	poll.Until(t, 20*time.Second, func() error {
		if recs = failureRecords(t, e); len(recs) != 1 || !recs[0].UpdatedAt.After(first) {
			return fmt.Errorf("the failure record was never refreshed: %d records", len(recs))
		}
		return nil
	})
	if after := e.epochs(); after != before {
		t.Fatalf("lease epochs grew from %d to %d while the member was failed", before, after)
	}
	if s := b.g.Status(); s.State != group.Failed {
		t.Fatalf("state %s, want still failed", s.State)
	}
	b.stop()
	if recs := failureRecords(t, e); len(recs) != 0 {
		t.Fatalf("the record outlived the member's stop: %+v", recs)
	}
}

// TestRollingDeployKeepsTheOldDefinitionRunning: during a rolling deploy a
// member with a new definition fails and leaves the group; the member with
// the old one keeps every partition and delivers.
func TestRollingDeployKeepsTheOldDefinitionRunning(t *testing.T) {
	e := newFenv(t)
	const partitions = 2
	a := e.join("a", partitions)
	waitState(t, a, "ran both partitions", func(s group.Status) bool { return len(s.Partitions) == partitions })
	e.waitClaimed(partitions)
	b := e.join("b", partitions, ferry.Pipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}))
	waitState(t, b, "failed", func(s group.Status) bool { return s.State == group.Failed })
	waitState(t, a, "kept both partitions", func(s group.Status) bool {
		return s.State == group.Running && len(s.Partitions) == partitions && len(a.g.Owned()) == partitions
	})
	for i := range int32(20) {
		if _, err := e.source.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int32(20) {
		waitApplied(t, a, i, "not delivered by the old member")
	}
}

// TestFailureThatClearsIsRechecked: a failure that can clear (the user
// lacks a privilege, for as long as the fail point is on) fails the
// stream; the member re-checks with backoff, and stays failed while the
// condition holds, with the same failure and since-time.
func TestFailureThatClearsIsRechecked(t *testing.T) {
	e := newFenv(t)
	e.failAggregates(13, "alwaysOn")
	m := e.join("a", 1)
	s := waitState(t, m, "failed", func(s group.Status) bool { return s.State == group.Failed })
	if s.Failure.Class != ferry.FailUnauthorized || !s.Failure.Clears || s.RetryAt.IsZero() {
		t.Fatalf("status %+v: want an unauthorized failure with a re-check time", s)
	}
	// It re-checks (starting again) and fails again: the condition holds.
	waitState(t, m, "re-checked", func(group.Status) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		for _, st := range m.states {
			if st == group.Failed {
				n++
			}
		}
		return n >= 2
	})
	if got := m.g.Status(); got.Failure == nil || got.FailedSince != s.FailedSince {
		t.Fatalf("after a re-check: failure %+v since %v, want the same failure since %v", got.Failure, got.FailedSince, s.FailedSince)
	}
}

// TestImageMissingStaysFailedUntilAPositionIsSet: full_document_before_change
// required, and an update made without pre-images: the stream fails with
// image-missing, which does not clear by itself, so the member takes no
// lease again while failed (the epochs stop) over several refreshes of its
// record. A position set after the change (as ferry position set writes
// it) with RequestRecheck ends it: the member re-checks at its next
// refresh, recovers and delivers what follows.
func TestImageMissingStaysFailedUntilAPositionIsSet(t *testing.T) {
	e := newFenv(t)
	c := e.source.Collection("c")
	ctx := context.Background()
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(1)}}); err != nil {
		t.Fatal(err)
	}
	m := e.join("a", 1, ferry.FullDocumentBeforeChange("required"))
	waitState(t, m, "ran its partition", func(s group.Status) bool { return len(s.Partitions) == 1 })
	e.waitClaimed(1)
	if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	s := waitState(t, m, "failed", func(s group.Status) bool { return s.State == group.Failed })
	if s.Failure.Class != ferry.FailImageMissing || s.Failure.Clears || !s.RetryAt.IsZero() {
		t.Fatalf("status %+v: want an image-missing failure that is not re-checked by itself", s)
	}
	epochs := e.epochs()
	first := failureRecords(t, e)[0].UpdatedAt
	poll.Until(t, 20*time.Second, func() error {
		if recs := failureRecords(t, e); len(recs) != 1 || recs[0].UpdatedAt.Sub(first) < 3*time.Second {
			return fmt.Errorf("the failure record was not refreshed 3s after its first write: %d records", len(recs))
		}
		return nil
	})
	if got := e.epochs(); got != epochs {
		t.Fatalf("lease epochs grew from %d to %d while failed", epochs, got)
	}
	// Move the position past the update: a start time after it.
	cps, err := mongostore.New(e.state)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := cps.Load(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	after := e.clusterTime()
	cp.Token, cp.ClusterTime, cp.Pending = nil, bson.Timestamp{T: after.T, I: after.I + 1}, bson.Timestamp{}
	if _, err := cps.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if n, err := group.RequestRecheck(ctx, e.state, "s"); err != nil || n != 1 {
		t.Fatalf("RequestRecheck = %d, %v; want 1 member asked", n, err)
	}
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(2)}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, m, "recovered", func(s group.Status) bool {
		return s.State == group.Running && s.Failure == nil && len(s.Partitions) == 1
	})
	waitApplied(t, m, 2, "(inserted after the new position) not delivered")
}

// failAggregates turns on a failCommand fail point for the aggregates on
// the source collection c (mode "alwaysOn" or {times: n}), off when the
// test ends.
func (e *fenv) failAggregates(code int32, mode any) {
	e.t.Helper()
	err := e.client.Database("admin").RunCommand(context.Background(), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: mode},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"aggregate"}}, {Key: "errorCode", Value: code},
			{Key: "namespace", Value: e.source.Name() + ".c"}}},
	}).Err()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err()
	})
}

// clusterTime is the source's latest cluster time.
func (e *fenv) clusterTime() bson.Timestamp {
	e.t.Helper()
	var reply struct {
		OperationTime bson.Timestamp `bson:"operationTime"`
	}
	if err := e.source.RunCommand(context.Background(), bson.D{{Key: "ping", Value: 1}}).Decode(&reply); err != nil || reply.OperationTime.IsZero() {
		e.t.Fatalf("ping: operationTime %v, %v", reply.OperationTime, err)
	}
	return reply.OperationTime
}

// TestFailureThatClearsRecovers: a failure that clears by itself (the user
// lacked a privilege, twice) is re-checked, and once the stream runs again
// the member recovers: no failure, no record, events delivered.
func TestFailureThatClearsRecovers(t *testing.T) {
	e := newFenv(t)
	e.failAggregates(13, bson.D{{Key: "times", Value: 2}})
	m := e.join("a", 1)
	s := waitState(t, m, "failed", func(s group.Status) bool { return s.State == group.Failed })
	if s.Failure.Class != ferry.FailUnauthorized || !s.Failure.Clears {
		t.Fatalf("status %+v: want an unauthorized failure that clears", s)
	}
	waitState(t, m, "recovered", func(s group.Status) bool {
		return s.State == group.Running && s.Failure == nil && len(s.Partitions) == 1
	})
	if recs := failureRecords(t, e); len(recs) != 0 {
		t.Fatalf("records after recovery: %+v", recs)
	}
	if _, err := e.source.Collection("c").InsertOne(context.Background(), bson.D{{Key: "_id", Value: int32(7)}}); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, m, 7, "not delivered after recovery")
}

// waitClaimed waits until n partitions' checkpoints were written by a
// consumer (they carry its definition's identity), not only seeded.
func (e *fenv) waitClaimed(n int64) {
	e.t.Helper()
	poll.Until(e.t, 20*time.Second, func() error {
		c, err := e.state.Collection("checkpoints").CountDocuments(context.Background(),
			bson.D{{Key: "stream", Value: "s"}, {Key: "identity", Value: bson.D{{Key: "$nin", Value: bson.A{"", nil}}}}})
		if err != nil {
			e.t.Fatal(err)
		}
		if c < n {
			return fmt.Errorf("%d of %d checkpoints claimed by a consumer", c, n)
		}
		return nil
	})
}

func failureRecords(t *testing.T, e *fenv) []group.FailureRecord {
	t.Helper()
	recs, err := group.Failures(context.Background(), e.state, "s")
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
