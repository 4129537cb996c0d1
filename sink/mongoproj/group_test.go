package mongoproj_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/childproc"
	"github.com/ferry-io/ferry/internal/emutest"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// The group test runs members as child processes (this test binary,
// re-executed with groupChildEnv set), so SIGKILL is real.

const groupChildEnv = "FERRY_MONGOPROJ_GROUP_CHILD"

func TestMain(m *testing.M) { childproc.Main(m, groupChildEnv, runGroupChild, nil) }

// groupSpec is what a child member needs, passed as JSON.
type groupSpec struct {
	URI        string
	SourceDB   string
	SourceColl string
	StateDB    string
	TargetDB   string
	TargetColl string
	Member     string
	Partitions int
	TTL        time.Duration
	Start      bson.Timestamp
}

const groupName = "proj"

// childHooks reports, on stdout, what the parent checks: resumes by class
// and applied backfill events (after the handler's transaction committed).
type childHooks struct{ say func(string, ...any) }

func (h childHooks) OnResume(i ferry.ResumeInfo) { h.say("RESUME %d %s", i.Partition, i.Class) }

func (h childHooks) OnEvent(i ferry.EventInfo) {
	if i.Operation == "backfill" && i.Result == ferry.ResultApplied {
		h.say("BF %d %s", i.Partition, i.EventID)
	}
}

// logLines reports the end of each backfill on stdout ("BFDONE partition
// documents") and keeps warnings and errors ("LOG ...") for a failure's
// report. The JSON handler writes one record per Write.
type logLines struct{ say func(string, ...any) }

func (w logLines) Write(b []byte) (int, error) {
	var rec struct {
		Level     string `json:"level"`
		Msg       string `json:"msg"`
		Partition int    `json:"partition"`
		Documents int    `json:"documents"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return 0, err
	}
	switch {
	case rec.Msg == "snapshot finished":
		w.say("BFDONE %d %d", rec.Partition, rec.Documents)
	case rec.Level == "WARN" || rec.Level == "ERROR":
		w.say("LOG %s", strings.TrimSpace(string(b)))
	}
	return len(b), nil
}

// runGroupChild is one member: the mongoproj sink in transactional mode,
// backfilling (and sweeping its own partition) when history is lost.
func runGroupChild(raw string) error {
	var spec groupSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return err
	}
	client, err := mongo.Connect(options.Client().ApplyURI(spec.URI))
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}
	s, err := mongoproj.New(client.Database(spec.TargetDB).Collection(spec.TargetColl))
	if err != nil {
		return err
	}
	if err := s.Connect(context.Background()); err != nil {
		return err
	}
	g, err := group.New(client, sink.Handler(s),
		group.Name(groupName), group.Partitions(spec.Partitions), group.MemberID(spec.Member),
		group.StateDatabase(client.Database(spec.StateDB)), group.DeliveryMode(group.Transactional),
		group.LeaseTTL(spec.TTL), group.RebalanceInterval(50*time.Millisecond),
		group.LeaseOptions(lease.MemberTimeout(spec.TTL), lease.HeartbeatInterval(spec.TTL/5)),
		group.OnAssigned(func(p int, epoch int64) { say("ASSIGNED %d %d", p, epoch) }),
		group.Sweeper(s.SweepPartition),
		group.ConsumerOptions(
			ferry.WatchCollection(spec.SourceDB, spec.SourceColl),
			ferry.FullDocument("updateLookup"),
			ferry.StartAt(ferry.StartAtTime(spec.Start)),
			ferry.OnHistoryLost(ferry.HistoryLostBackfill),
			ferry.MaxAwaitTime(50*time.Millisecond),
			ferry.CommitEvery(10, 20*time.Millisecond),
			ferry.Retry(10, 5*time.Millisecond, 200*time.Millisecond),
			ferry.WithHooks(childHooks{say}),
			ferry.Logger(slog.New(slog.NewJSONHandler(logLines{say}, nil))),
		))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	say("STARTED")
	return g.Run(ctx)
}

// groupRun is one run of the test: the server, the collections and the
// members started so far.
type groupRun struct {
	spec   groupSpec
	client *mongo.Client
	source *mongo.Collection
	target *mongo.Collection
	state  *mongo.Database
	leases *lease.Store
	cps    *mongostore.Store
}

func (r *groupRun) spawn(t *testing.T, member string) *childproc.Child {
	t.Helper()
	spec := r.spec
	spec.Member = member
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := childproc.Start(t, groupChildEnv, string(raw))
	p.Name = "member " + member
	t.Cleanup(func() {
		if t.Failed() {
			lines := p.Lines()
			t.Logf("member %s printed %d lines; the last ones:\n%s", member, len(lines), strings.Join(lines[max(0, len(lines)-25):], "\n"))
		}
	})
	return p
}

// waitExit waits for a member sent SIGTERM and requires a clean exit (a
// graceful leave; a race report in the child would fail it too).
func (r *groupRun) waitExit(t *testing.T, p *childproc.Child) {
	t.Helper()
	if err := p.WaitWithin(30 * time.Second); err != nil {
		t.Errorf("%s did not leave cleanly after SIGTERM: %v", p.Name, err)
	}
}

// owners returns partition → live owner, judged by the server's clock.
func (r *groupRun) owners(t *testing.T) map[int]string {
	t.Helper()
	list, err := r.leases.List(context.Background(), groupName)
	if err != nil {
		t.Fatal(err)
	}
	return lease.Owners(list)
}

// waitOwned waits until every partition has a live owner among members.
func (r *groupRun) waitOwned(t *testing.T, members ...string) {
	t.Helper()
	ok := map[string]bool{}
	for _, m := range members {
		ok[m] = true
	}
	poll.Until(t, 60*time.Second, func() error {
		own := r.owners(t)
		held := map[string]bool{}
		for p := range r.spec.Partitions {
			if !ok[own[p]] {
				return fmt.Errorf("partition %d owned by %q, want one of %v (owners %v)", p, own[p], members, own)
			}
			held[own[p]] = true
		}
		if len(held) < min(len(members), r.spec.Partitions) {
			return fmt.Errorf("not balanced yet: owners %v", own)
		}
		return nil
	})
}

func (r *groupRun) count(t *testing.T, c *mongo.Collection, filter bson.D) int64 {
	t.Helper()
	n, err := c.CountDocuments(context.Background(), filter)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (r *groupRun) opTime(t *testing.T) bson.Timestamp {
	t.Helper()
	return operationTime(t, r.client)
}

// loader applies random inserts, updates, replaces and deletes to the
// source over a fixed key space.
type loader struct {
	source  *mongo.Collection
	rng     *rand.Rand
	present map[int32]bool
	writes  atomic.Int64
}

func (l *loader) write(ctx context.Context) error {
	const keys = 60
	id := int32(l.rng.IntN(keys))
	var err error
	switch {
	case !l.present[id]:
		_, err = l.source.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: int32(0)}, {Key: "tag", Value: fmt.Sprintf("new-%d", l.writes.Load())}})
		l.present[id] = err == nil
	case l.rng.IntN(5) == 0:
		_, err = l.source.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
		l.present[id] = err != nil
	case l.rng.IntN(4) == 0:
		_, err = l.source.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "r", Value: l.rng.Int32()}, {Key: "w", Value: l.writes.Load()}})
	default:
		_, err = l.source.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{
			{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}},
			{Key: "$set", Value: bson.D{{Key: "sub", Value: bson.D{{Key: "x", Value: l.rng.Int32()}}}}},
		})
	}
	if err != nil {
		return err
	}
	l.writes.Add(1)
	return nil
}

// background runs the load, one write every `every`, until the returned
// stop function is called; stop returns the number of writes.
func (l *loader) background(t *testing.T, every time.Duration) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(every) // pacing, not synchronisation
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-tick.C:
			}
			if err := l.write(context.Background()); err != nil { // a write is never cut short
				done <- err
				return
			}
		}
	}()
	return func() int {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("load: %v", err)
		}
		return int(l.writes.Load())
	}
}

// TestGroupProjectionEqualsSourceAfterKillsAndHistoryLost runs the
// projection through a consumer group (transactional mode, target in the
// state store's server) under a random write load: members are SIGKILLed
// and replaced, then every member is killed, the source changes while
// nobody reads, and the oplog is flooded until every checkpoint's token
// has fallen off it. The members started afterwards find the history
// lost, backfill their partitions and sweep them. Once the load stopped
// and every partition's checkpoint passed the last write, the projection
// must equal the source, document for document.
func TestGroupProjectionEqualsSourceAfterKillsAndHistoryLost(t *testing.T) {
	// Cold documents (_id coldFirst...) are inserted once, projected,
	// then changed only while every member is down.
	const oplogBytes, coldFirst, coldDocs = 4 << 20, int32(1000), 40
	client, srv := emutest.Client(t, emutest.OplogMaxBytes(oplogBytes))
	if srv == nil {
		t.Skip("needs the emulator: the history loss is forced with its oplog bound")
	}
	began := time.Now()
	ctx := context.Background()
	// A killed member's open transaction locks what it wrote until the
	// server reaps it; a short lifetime keeps the test short.
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "transactionLifetimeLimitSeconds", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	r := &groupRun{client: client, spec: groupSpec{
		URI: srv.URI(), SourceDB: "grp_src", SourceColl: "orders", StateDB: "grp_state",
		TargetDB: "grp_read", TargetColl: "orders", Partitions: 4, TTL: time.Second,
	}}
	r.source = client.Database(r.spec.SourceDB).Collection(r.spec.SourceColl)
	r.target = client.Database(r.spec.TargetDB).Collection(r.spec.TargetColl)
	r.state = client.Database(r.spec.StateDB)
	// Collections written inside transactions exist beforehand.
	for _, c := range []*mongo.Collection{r.source, r.target} {
		if err := c.Database().CreateCollection(ctx, c.Name()); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if r.leases, err = lease.New(r.state); err != nil {
		t.Fatal(err)
	}
	if r.cps, err = mongostore.New(r.state); err != nil {
		t.Fatal(err)
	}
	r.spec.Start = r.opTime(t)
	load := &loader{source: r.source, rng: rand.New(rand.NewPCG(3, 5)), present: map[int32]bool{}}
	kills := 0
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(began).Seconds(), what) }

	// Phase 1: three members under load; two of them are killed midway
	// and replaced.
	m := map[string]*childproc.Child{}
	for _, name := range []string{"m0", "m1", "m2"} {
		m[name] = r.spawn(t, name)
	}
	r.waitOwned(t, "m0", "m1", "m2")
	phase("members up")
	stopLoad := load.background(t, 2*time.Millisecond)
	var cold []any
	for i := range int32(coldDocs) {
		cold = append(cold, bson.D{{Key: "_id", Value: coldFirst + i}, {Key: "cold", Value: true}, {Key: "v", Value: i}})
	}
	if _, err := r.source.InsertMany(ctx, cold); err != nil {
		t.Fatal(err)
	}
	load.writes.Add(coldDocs)
	poll.Until(t, 60*time.Second, func() error {
		if n := r.count(t, r.target, append(bson.D{{Key: "cold", Value: true}}, mongoproj.Live()...)); n < coldDocs {
			return fmt.Errorf("the projection holds %d of the %d cold documents before the kill", n, coldDocs)
		}
		return nil
	})
	phase("cold documents projected")
	// The victims own partitions: wait out a hand-off in progress (every
	// partition owned, each victim owning one).
	poll.Until(t, 60*time.Second, func() error {
		before := r.owners(t)
		if len(before) < r.spec.Partitions {
			return fmt.Errorf("owners %v: not every partition owned", before)
		}
		for _, victim := range []string{"m1", "m2"} {
			if !slices.Contains(slices.Collect(maps.Values(before)), victim) {
				return fmt.Errorf("victim %s owns no partition (owners %v)", victim, before)
			}
		}
		return nil
	})
	for _, victim := range []string{"m1", "m2"} {
		m[victim].Kill() // and requires that it died of the SIGKILL
		kills++
	}
	phase("two members killed")
	m["m3"] = r.spawn(t, "m3")
	m["m4"] = r.spawn(t, "m4")
	r.waitOwned(t, "m0", "m3", "m4")
	phase("replacements own every partition")
	// The replacements apply events: the ledger grows under them.
	ledger := r.state.Collection("ledger")
	applied := r.count(t, ledger, bson.D{})
	poll.Until(t, 60*time.Second, func() error {
		if n := r.count(t, ledger, bson.D{}); n < applied+50 {
			return fmt.Errorf("ledger holds %d entries, want %d after the takeover", n, applied+50)
		}
		return nil
	})

	phase("replacements applying")
	// Phase 2: every member is killed (mid-load, checkpoints lagging); the
	// source changes while nobody reads; then the oplog is flooded until
	// no checkpoint can be resumed from.
	for _, name := range []string{"m0", "m3", "m4"} {
		m[name].Kill()
		kills++
	}
	stopLoad()
	phase("every member killed")
	for range 150 {
		if err := load.write(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The cold documents change unseen by any stream: deleted ones only
	// the sweep removes from the projection, updated ones only the
	// backfill carries (the load never touches them again).
	if _, err := r.source.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: coldFirst}, {Key: "$lt", Value: coldFirst + coldDocs/2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.source.UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: coldFirst + coldDocs/2}, {Key: "$lt", Value: coldFirst + 3*coldDocs/4}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "unseen"}}}}); err != nil {
		t.Fatal(err)
	}
	unseen := coldDocs / 2
	load.writes.Add(coldDocs/2 + coldDocs/4)
	phase("source changed unseen")
	filler := client.Database("grp_filler").Collection("ballast")
	pad := strings.Repeat("x", 512<<10)
	for i := range 2 * oplogBytes / len(pad) {
		if _, err := filler.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}); err != nil {
			t.Fatal(err)
		}
	}
	phase("oplog flooded")
	cps, err := r.cps.List(ctx, groupName)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != r.spec.Partitions {
		t.Fatalf("%d checkpoints, want %d", len(cps), r.spec.Partitions)
	}
	for _, cp := range cps {
		if cp.Token == nil {
			t.Fatalf("partition %d has no checkpoint token", cp.Partition)
		}
		cs, err := r.source.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(cp.Token))
		if err == nil {
			cs.Close(ctx)
			t.Fatalf("partition %d's checkpoint can still be resumed from: the flood did not push it off the oplog", cp.Partition)
		}
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(286) {
			t.Fatalf("resuming partition %d's checkpoint: %v, want ChangeStreamHistoryLost (286)", cp.Partition, err)
		}
	}

	// Phase 3: new members find the history lost, backfill and sweep,
	// under load again.
	final := []string{"m5", "m6", "m7"}
	for _, name := range final {
		m[name] = r.spawn(t, name)
	}
	stopLoad = load.background(t, 2*time.Millisecond)
	lostParts := map[int]bool{}
	doneParts := map[int]bool{}
	backfillEvents := map[string]bool{}
	backfilledDocs := 0
	scan := func() {
		backfilledDocs = 0
		for _, name := range final {
			for _, l := range m[name].Lines() {
				f := strings.Fields(l)
				switch {
				case len(f) == 3 && f[0] == "RESUME" && f[2] == "history-lost":
					p, _ := strconv.Atoi(f[1])
					lostParts[p] = true
				case len(f) == 3 && f[0] == "BFDONE":
					p, _ := strconv.Atoi(f[1])
					doneParts[p] = true
					n, _ := strconv.Atoi(f[2])
					backfilledDocs += n
				case len(f) == 3 && f[0] == "BF":
					backfillEvents[f[2]] = true
				}
			}
		}
	}
	poll.Until(t, 60*time.Second, func() error {
		scan()
		if len(lostParts) < r.spec.Partitions || len(doneParts) < r.spec.Partitions {
			return fmt.Errorf("history lost on partitions %v, backfill finished on %v", lostParts, doneParts)
		}
		return nil
	})
	phase("every partition backfilled")
	// More changes, streamed after the backfills, then the load stops.
	mark := load.writes.Load()
	poll.Until(t, 60*time.Second, func() error {
		if n := load.writes.Load(); n < mark+100 {
			return fmt.Errorf("%d writes since the backfills finished, want 100", n-mark)
		}
		return nil
	})
	writes := stopLoad()
	phase("load stopped")
	end := r.opTime(t)

	// The group caught up: every partition's checkpoint passed the last
	// write (a checkpoint never passes an event that was not applied).
	poll.Until(t, 60*time.Second, func() error {
		cps, err := r.cps.List(ctx, groupName)
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range cps {
			if cp.State != checkpoint.StateRunning || cp.Token == nil {
				return fmt.Errorf("partition %d: state %q (%s)", cp.Partition, cp.State, cp.Note)
			}
			tok, err := resumetoken.Parse(cp.Token)
			if err != nil {
				t.Fatal(err)
			}
			if !tsAfter(tok.ClusterTime, end) {
				return fmt.Errorf("partition %d's checkpoint is at %v, the last write at %v", cp.Partition, tok.ClusterTime, end)
			}
		}
		return nil
	})
	phase("every checkpoint past the last write")
	if n := r.count(t, r.state.Collection("dlq"), bson.D{}); n != 0 {
		t.Errorf("%d events were dead-lettered", n)
	}
	if !sameDocs(t, r.source, r.target) {
		t.Fatal("the projection differs from the source")
	}
	docs := r.count(t, r.source, bson.D{})
	if tombs := r.count(t, r.target, bson.D{{Key: mongoproj.Field + ".del", Value: true}}); tombs > 0 {
		t.Logf("%d tombstones (deletes streamed after the backfills)", tombs)
	}
	// Every final member leaves gracefully (at once: one by one, each
	// leave would hand its partitions to the others first).
	for _, name := range final {
		m[name].Signal(syscall.SIGTERM)
	}
	for _, name := range final {
		r.waitExit(t, m[name])
	}
	phase("final members left")
	scan()
	if kills == 0 || len(backfillEvents) == 0 || backfilledDocs == 0 || len(lostParts) == 0 {
		t.Fatalf("kills %d, %d backfill events applied, %d documents backfilled, history lost on %d partitions: the run proved nothing",
			kills, len(backfillEvents), backfilledDocs, len(lostParts))
	}
	t.Logf("took %v", time.Since(began))
	fmt.Printf("mongoproj group: %d writes, %d kills, history lost on %d of %d partitions, backfilled %d docs (%d backfill events applied), %d unseen deletes swept, projection == source (%d docs)\n",
		writes, kills, len(lostParts), r.spec.Partitions, backfilledDocs, len(backfillEvents), unseen, docs)
}

func tsAfter(a, b bson.Timestamp) bool { return a.T > b.T || a.T == b.T && a.I > b.I }
