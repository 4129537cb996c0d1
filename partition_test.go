package ferry_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/internal/poll"
)

// previousDigest is the identity digest as Ferry computed it before
// streams had a partitioning (identity.go at 2cafe6e): the definition
// below, canonical BSON, sha256.
func previousDigest(t *testing.T, name string, scope ferry.Scope, pipeline []bson.D, fullDoc, before string,
	expanded, noSplit bool, partitions int) string {
	t.Helper()
	stages := bson.A{}
	for _, st := range pipeline {
		stages = append(stages, st)
	}
	mode := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	opts := bson.D{
		{Key: "fullDocument", Value: mode(fullDoc, "default")},
		{Key: "fullDocumentBeforeChange", Value: mode(before, "off")},
		{Key: "showExpandedEvents", Value: expanded},
	}
	if noSplit {
		opts = append(opts, bson.E{Key: "splitLargeEvents", Value: false})
	}
	raw, err := bson.Marshal(bson.D{
		{Key: "v", Value: 1},
		{Key: "name", Value: name},
		{Key: "scope", Value: bson.D{{Key: "db", Value: scope.DB}, {Key: "coll", Value: scope.Coll}}},
		{Key: "pipeline", Value: stages},
		{Key: "options", Value: opts},
		{Key: "partitions", Value: partitions},
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// TestHashModIdentityIsThePreviousOne: a stream's identity under HashMod
// is the digest Ferry computed before partitionings existed, so that
// checkpoints written then still match; under HashRange (the default) it
// differs with more than one partition, and with one partition the
// partitioning is not part of it at all. The two known answers were
// computed by the code at 2cafe6e; the other cases reproduce its encoding.
func TestHashModIdentityIsThePreviousOne(t *testing.T) {
	e := newEnv(t)
	identity := func(opts ...ferry.Option) string {
		t.Helper()
		c, err := ferry.NewConsumer(e.client, nopHandler, append([]ferry.Option{ferry.Checkpoints(e.store),
			ferry.OnPoison(ferry.PoisonStall)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c.Identity()
	}
	insertsOnly := []bson.D{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}}
	orders := []ferry.Option{ferry.Stream("orders"), ferry.WatchCollection("shop", "orders"), ferry.Pipeline(insertsOnly...),
		ferry.FullDocument("updateLookup")}
	known := map[int]string{ // computed by 2cafe6e's config.identity()
		1: "7bf853d8a7cada26c6515a3c3f6571bc5661108d5c41d1eafcef9ce19bc2a74b",
		4: "d52b43551a4e83990b473d8b731ee80dff43a6effba9a5f56b092be021a7df22",
	}
	if got := identity(append(orders, ferry.Partition(0, 4), ferry.WithPartitioning(ferry.HashMod))...); got != known[4] {
		t.Errorf("4 partitions, HashMod: identity %s, want the previous digest %s", got, known[4])
	}
	if got := identity(append(orders, ferry.Partition(2, 4))...); got == known[4] {
		t.Errorf("4 partitions, HashRange (default): identity %s equals the HashMod one", got)
	}
	for _, scheme := range []ferry.Partitioning{"", ferry.HashRange, ferry.HashMod} {
		if got := identity(append(orders, ferry.WithPartitioning(scheme))...); got != known[1] {
			t.Errorf("1 partition, partitioning %q: identity %s, want the previous digest %s", scheme, got, known[1])
		}
	}

	for _, c := range []struct {
		scope             ferry.Scope
		watch             ferry.Option
		pipeline          []bson.D
		fullDoc, before   string
		expanded, noSplit bool
		partitions        int
	}{
		{ferry.Scope{DB: "shop", Coll: "orders"}, ferry.WatchCollection("shop", "orders"), nil, "", "", false, false, 2},
		{ferry.Scope{DB: "shop"}, ferry.WatchDatabase("shop"), insertsOnly, "required", "whenAvailable", true, false, 8},
		{ferry.Scope{}, ferry.WatchCluster(), nil, "whenAvailable", "required", false, true, 200},
	} {
		opts := []ferry.Option{ferry.Stream("s1"), c.watch, ferry.Pipeline(c.pipeline...), ferry.FullDocument(c.fullDoc),
			ferry.FullDocumentBeforeChange(c.before), ferry.ShowExpandedEvents(c.expanded), ferry.SplitLargeEvents(!c.noSplit),
			ferry.Partition(1, c.partitions)}
		want := previousDigest(t, "s1", c.scope, c.pipeline, c.fullDoc, c.before, c.expanded, c.noSplit, c.partitions)
		if got := identity(append(opts, ferry.WithPartitioning(ferry.HashMod))...); got != want {
			t.Errorf("%s, %d partitions, HashMod: identity %s, want the previous digest %s", c.scope, c.partitions, got, want)
		}
		if got := identity(opts...); got == want {
			t.Errorf("%s, %d partitions, HashRange: identity is the HashMod one", c.scope, c.partitions)
		}
	}
}

// TestWithPartitioningValidated: an unknown partitioning is a problem
// naming the option and the values it takes.
func TestWithPartitioningValidated(t *testing.T) {
	got := configProblems(t, ferry.WithPartitioning("mod"))
	for _, p := range got {
		if strings.HasPrefix(p, `WithPartitioning: "mod" is not a partitioning`) && strings.Contains(p, "hash-range") &&
			strings.Contains(p, "hash-mod") {
			return
		}
	}
	t.Fatalf("no problem names WithPartitioning and its values; got:\n  %s", strings.Join(got, "\n  "))
}

// waitCheckpointed waits until partition p of stream "s" has a checkpoint
// with a token.
func waitCheckpointed(t *testing.T, store checkpoint.Store, p int) checkpoint.Checkpoint {
	t.Helper()
	var cp checkpoint.Checkpoint
	poll.Until(t, 20*time.Second, func() error {
		var err error
		if cp, err = store.Load(context.Background(), "s", p); err != nil {
			return fmt.Errorf("partition %d: no checkpoint written: %w", p, err)
		}
		if cp.Token == nil {
			return fmt.Errorf("partition %d: no checkpoint with a token written", p)
		}
		return nil
	})
	return cp
}

// partitionOfID is the partition of an int32 _id under scheme.
func partitionOfID(t *testing.T, scheme ferry.Partitioning, id int32, n int) int {
	t.Helper()
	h, err := hashkey.Hash(id)
	if err != nil {
		t.Fatal(err)
	}
	for p := range n {
		if ferry.InPartition(scheme, h, p, n) {
			return p
		}
	}
	t.Fatalf("_id %d is in no partition", id)
	return -1
}

// TestUpgradedStreamKeepsHashMod is the upgrade of a stream whose
// checkpoints were written before partitionings existed (under HashMod,
// whose identity is the previous one): its consumers, with no
// partitioning set, keep HashMod — no identity error, every change
// written while they were stopped delivered once, each by the partition
// HashMod routes it to — and each logs once that the stream keeps
// hash-mod, what it costs and how to move (checkpoints_of).
func TestUpgradedStreamKeepsHashMod(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("c")
	const n = 2
	// Before the upgrade.
	var old []*running
	for p := range n {
		old = append(old, start(t, e.client, nopHandler, e.opts(ferry.Partition(p, n), ferry.WithPartitioning(ferry.HashMod))...))
	}
	for p := range n {
		waitCheckpointed(t, e.store, p)
	}
	for _, r := range old {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int32(40) {
		insert(t, c, bson.D{{Key: "_id", Value: i}})
	}
	// After it: no partitioning set.
	logs := &lockedBuffer{}
	recs := make([]*recorder, n)
	cons := make([]*ferry.Consumer, n)
	runs := make([]*running, n)
	for p := range n {
		recs[p] = newRecorder()
		var err error
		cons[p], err = ferry.NewConsumer(e.client, recs[p].handle, e.opts(ferry.Partition(p, n),
			ferry.Logger(slog.New(slog.NewTextHandler(logs, nil))))...)
		if err != nil {
			t.Fatal(err)
		}
		runs[p] = runInBackground(t, cons[p])
	}
	poll.Until(t, 20*time.Second, func() error {
		total := 0
		for p := range n {
			select {
			case err := <-runs[p].done:
				runs[p].done <- err // for the cleanup's stop
				t.Fatalf("partition %d stopped: %v", p, err)
			default:
			}
			total += len(recs[p].snapshot())
		}
		if total < 40 {
			return fmt.Errorf("%d of 40 changes delivered", total)
		}
		return nil
	})
	seen := map[int]int{}
	for p := range n {
		if got := cons[p].Partitioning(); got != ferry.HashMod {
			t.Errorf("partition %d runs with %q, want hash-mod", p, got)
		}
		for _, id := range sortedIDs(recs[p].snapshot()) {
			seen[id]++
			if want := partitionOfID(t, ferry.HashMod, int32(id), n); want != p {
				t.Errorf("_id %d was delivered by partition %d, hash-mod routes it to %d", id, p, want)
			}
		}
	}
	for i := range 40 {
		if seen[i] != 1 {
			t.Errorf("_id %d delivered %d times, want once", i, seen[i])
		}
	}
	for p := range n {
		if err := runs[p].stop(t); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
	for p := range n {
		cp, err := e.store.Load(context.Background(), "s", p)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Identity != cons[p].Identity() {
			t.Errorf("partition %d checkpointed under identity %s, want its HashMod one %s", p, cp.Identity, cons[p].Identity())
		}
	}
	if got := strings.Count(logs.String(), "keeps hash-mod partitioning"); got != n {
		t.Errorf("the log says %d times that the stream keeps hash-mod, want once per partition (%d):\n%s", got, n, logs)
	}
	for _, want := range []string{"reads every document at the server 2 times", "checkpoints_of: s", "level=INFO"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
}

// TestPartitionWithoutCheckpointFollowsHashMod: a partition that has no
// checkpoint of its own, in a stream whose other partitions checkpointed
// under HashMod, runs with HashMod too: the partitions of one stream
// agree.
func TestPartitionWithoutCheckpointFollowsHashMod(t *testing.T) {
	e := newEnv(t)
	r := start(t, e.client, nopHandler, e.opts(ferry.Partition(0, 3), ferry.WithPartitioning(ferry.HashMod))...)
	mod := waitCheckpointed(t, e.store, 0).Identity
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	c, err := ferry.NewConsumer(e.client, nopHandler, e.opts(ferry.Partition(2, 3))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	cp := waitCheckpointed(t, e.store, 2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cp.Identity != mod || c.Partitioning() != ferry.HashMod {
		t.Errorf("partition 2 ran with %q and checkpointed under %s, want hash-mod and %s", c.Partitioning(), cp.Identity, mod)
	}
}

// TestExplicitHashRangeOnHashModStreamRefused: a stream that checkpointed
// under HashMod, run with HashRange set, stops with ErrIdentityChanged
// naming the partitioning as what changed.
func TestExplicitHashRangeOnHashModStreamRefused(t *testing.T) {
	e := newEnv(t)
	r := start(t, e.client, nopHandler, e.opts(ferry.Partition(0, 2), ferry.WithPartitioning(ferry.HashMod))...)
	waitCheckpointed(t, e.store, 0)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	c, err := ferry.NewConsumer(e.client, nopHandler, e.opts(ferry.Partition(0, 2), ferry.WithPartitioning(ferry.HashRange))...)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(refusalContext(t))
	f, ok := ferry.AsFailure(err)
	if !errors.Is(err, ferry.ErrIdentityChanged) || !ok || f.Class != ferry.FailIdentityChanged {
		t.Fatalf("Run = %v, want ErrIdentityChanged", err)
	}
	if want := "partitioning was hash-mod, is now hash-range"; !strings.Contains(f.Detail, want) {
		t.Errorf("the failure's detail does not say %q:\n%s", want, f.Detail)
	}
	if strings.Contains(f.Detail, "pipeline was") || strings.Contains(f.Detail, "partitions was") {
		t.Errorf("the failure's detail names more than the partitioning:\n%s", f.Detail)
	}
}

// refusalContext is the context of a Run expected to refuse at once: it
// ends with the test's deadline bound (20 s), so that a Run that does not
// refuse returns nil (a cancellation) and fails the test instead of
// hanging it.
func refusalContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestMixedPartitioningsRefused: a stream with checkpoints written under
// both partitionings is refused (ErrIdentityChanged) by a consumer with
// no partitioning set, naming the partitions of each.
func TestMixedPartitioningsRefused(t *testing.T) {
	e := newEnv(t)
	for p, scheme := range []ferry.Partitioning{ferry.HashMod, ferry.HashRange} {
		r := start(t, e.client, nopHandler, e.opts(ferry.Partition(p, 2), ferry.WithPartitioning(scheme))...)
		waitCheckpointed(t, e.store, p)
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	for p := range 2 {
		c, err := ferry.NewConsumer(e.client, nopHandler, e.opts(ferry.Partition(p, 2))...)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Run(refusalContext(t))
		f, ok := ferry.AsFailure(err)
		if !errors.Is(err, ferry.ErrIdentityChanged) || !ok {
			t.Fatalf("partition %d: Run = %v, want ErrIdentityChanged", p, err)
		}
		for _, want := range []string{"two partitionings", "hash-mod for partitions [0]", "hash-range for partitions [1]"} {
			if !strings.Contains(f.Detail, want) {
				t.Errorf("partition %d: the failure's detail does not say %q:\n%s", p, want, f.Detail)
			}
		}
	}
	_, _, err := ferry.ResolvePartitioning(context.Background(), e.store, e.opts(ferry.Partition(0, 2))...)
	if !errors.Is(err, ferry.ErrIdentityChanged) {
		t.Errorf("ResolvePartitioning = %v, want ErrIdentityChanged", err)
	}
}

// TestResolvePartitioning: what a stream resolves to from its
// checkpoints: HashRange for a new one, HashMod (adopted) for one that
// checkpointed under it, the one set whatever is stored, and never a
// HashMod from another definition's checkpoints.
func TestResolvePartitioning(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	resolve := func(opts ...ferry.Option) (ferry.Partitioning, bool) {
		t.Helper()
		p, adopted, err := ferry.ResolvePartitioning(ctx, e.store, e.opts(opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return p, adopted
	}
	if p, adopted := resolve(ferry.Partition(0, 2)); p != ferry.HashRange || adopted {
		t.Errorf("a new stream resolves to %q (adopted %v), want hash-range", p, adopted)
	}
	r := start(t, e.client, nopHandler, e.opts(ferry.Partition(1, 2), ferry.WithPartitioning(ferry.HashMod))...)
	waitCheckpointed(t, e.store, 1)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if p, adopted := resolve(ferry.Partition(0, 2)); p != ferry.HashMod || !adopted {
		t.Errorf("a stream checkpointed under hash-mod resolves to %q (adopted %v), want hash-mod, adopted", p, adopted)
	}
	if p, adopted := resolve(ferry.Partition(0, 2), ferry.WithPartitioning(ferry.HashRange)); p != ferry.HashRange || adopted {
		t.Errorf("with hash-range set it resolves to %q (adopted %v), want hash-range", p, adopted)
	}
	if p, adopted := resolve(ferry.Partition(0, 4)); p != ferry.HashRange || adopted {
		t.Errorf("with another partition count it resolves to %q (adopted %v), want hash-range: the checkpoints are another definition's", p, adopted)
	}
	if p, adopted := resolve(ferry.Partition(0, 2), ferry.Pipeline(bson.D{{Key: "$match", Value: bson.D{{Key: "x", Value: 1}}}})); p != ferry.HashRange || adopted {
		t.Errorf("with another pipeline it resolves to %q (adopted %v), want hash-range", p, adopted)
	}
	// Set, nothing is read.
	if p, _, err := ferry.ResolvePartitioning(ctx, nil, ferry.Stream("s"), ferry.Partition(0, 2), ferry.WithPartitioning(ferry.HashMod)); err != nil || p != ferry.HashMod {
		t.Errorf("ResolvePartitioning with hash-mod set and no store = %q, %v", p, err)
	}
}

// TestPartitionsUnderHashRange: a new stream's partitions split the
// documents by ranges of the hashed _id, in the change stream and in a
// backfill scan: each document's events are delivered once, by the
// partition whose range holds its hash.
func TestPartitionsUnderHashRange(t *testing.T) {
	e := newEnv(t)
	c := e.db.Collection("c")
	const n = 4
	for i := range int32(60) {
		insert(t, c, bson.D{{Key: "_id", Value: i}})
	}
	recs := make([]*recorder, n)
	for p := range n {
		recs[p] = newRecorder()
		start(t, e.client, recs[p].handle, e.opts(ferry.Partition(p, n), ferry.StartAt(ferry.StartWithBackfill()))...)
	}
	for p := range n {
		waitCheckpointed(t, e.store, p)
	}
	for i := int32(100); i < 160; i++ {
		insert(t, c, bson.D{{Key: "_id", Value: i}})
	}
	// Every backfill row of _id 0-59 and every insert of _id 100-159. A
	// document inserted while a partition's snapshot still runs may come
	// as a row too (read at a cluster time after its insert, and spliced
	// after it): counting events would stop the wait before the last
	// insert came.
	poll.Until(t, 20*time.Second, func() error {
		got := map[string]bool{}
		for p := range n {
			for _, ev := range recs[p].snapshot() {
				got[fmt.Sprint(ev.Backfill, ev.DocumentKey.Lookup("_id").Int32())] = true
			}
		}
		missing := 0
		for i := range int32(160) {
			if (i < 60 || i >= 100) && !got[fmt.Sprint(i < 60, i)] {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of 120 events not delivered", missing)
		}
		return nil
	})
	seen := map[string]int{}
	for p := range n {
		if len(recs[p].snapshot()) == 0 {
			t.Errorf("partition %d delivered nothing", p)
		}
		for _, ev := range recs[p].snapshot() {
			id := ev.DocumentKey.Lookup("_id").Int32()
			seen[fmt.Sprint(ev.Backfill, id)]++
			if want := partitionOfID(t, ferry.HashRange, id, n); want != p {
				t.Errorf("_id %d (%s) was delivered by partition %d, its hash range is partition %d's", id, ev.OperationType, p, want)
			}
		}
	}
	for i := range int32(160) {
		if i >= 60 && i < 100 {
			continue
		}
		if k := seen[fmt.Sprint(i < 60, i)]; k != 1 {
			t.Errorf("_id %d delivered %d times, want once", i, k)
		}
		if k := seen[fmt.Sprint(true, i)]; i >= 100 && k > 1 {
			t.Errorf("_id %d (inserted during the snapshot) delivered as %d backfill rows, want at most one", i, k)
		}
	}
}
