// Command demo walks through Ferry's main job on an embedded MongoDB
// emulator: documents with a TTL expire, and each expiry (and each insert)
// must trigger work exactly once although the service runs as several
// instances, one of which crashes midway.
//
//	go run ./cmd/ferry/demo                    # the walk-through, ending with one line scripts can check
//	go run ./cmd/ferry/demo -takeover-runs 10  # takeover times after SIGKILL and SIGTERM, min/median/max
//	go run ./cmd/ferry/demo -takeover-runs 3 -partitions 200 -lease-ttl 10s   # the same with 200 partitions
//
// Its members are `ferry run` processes: this binary run with a `run`
// command line behaves as the ferry command (package cli). It is a
// command of its own because it links the emulator, which the ferry
// binary does not.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/cmd/ferry/internal/cli"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/sink/webhook"
)

// The demo walks through our first users' problem: documents with a TTL
// expire in MongoDB, and each expiry (and each insert) must trigger work
// exactly once although the service runs as several instances, one of which
// crashes midway. Its members are `ferry run` processes reading one
// configuration file the demo writes, so what it measures is what `ferry
// run` does with that file: nothing is tuned for the demo but lease_ttl
// (and, with -takeover-runs, the partition count and lease_ttl the flags
// give).
const (
	demoPartitions = 4
	demoLeaseTTL   = 2 * time.Second
	demoGroup      = "sessions"
)

// demoConfig is the configuration every demo member runs with: the
// defaults of `ferry run` but for lease_ttl, the emulator as source and
// state store, the receiver as webhook sink. FERRY_MEMBER_ID names each
// process (unset: the default id).
const demoConfig = `# Written by ferry demo; every member runs: ferry run -c <this file>
listen: "127.0.0.1:0"
log: {level: warn}
state:
  uri: %q
  database: ferry
streams:
  - name: %s
    source:
      uri: %q
      scope: {collection: demo.sessions}
    group:
      partitions: %d
      lease_ttl: %s
      member_id: ${FERRY_MEMBER_ID:-}
    delivery: {mode: idempotent}
    sink:
      webhook:
        url: %q
        secret: ${FERRY_DEMO_SECRET}
`

// demoEnv is the emulator, the receiver and the configuration of a demo.
type demoEnv struct {
	srv    *mongotest.Server
	client *mongo.Client
	coll   *mongo.Collection
	rcv    *demoReceiver
	secret string
	config string // the configuration file's path
	ls     *lease.Store
	dir    string
	stop   func()
	// partitions and ttl are the group's partition count and lease_ttl.
	partitions int
	ttl        time.Duration
}

func startDemoEnv(ctx context.Context, partitions int, ttl time.Duration) (*demoEnv, error) {
	srv, err := mongotest.Start(mongotest.TTLMonitorInterval(100 * time.Millisecond))
	if err != nil {
		return nil, err
	}
	e := &demoEnv{srv: srv, partitions: partitions, ttl: ttl}
	var closers []func()
	e.stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	closers = append(closers, srv.Close)
	fail := func(err error) (*demoEnv, error) { e.stop(); return nil, err }
	e.client, err = mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = e.client.Disconnect(context.Background()) })
	e.coll = e.client.Database("demo").Collection("sessions")
	if _, err := e.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "expireAt", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		return fail(err)
	}
	// The receiver: verifies signatures, applies each event once.
	secretBytes := make([]byte, 32)
	_, _ = rand.Read(secretBytes)
	e.secret = "whsec_" + base64.StdEncoding.EncodeToString(secretBytes)
	e.rcv = newDemoReceiver(secretBytes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	hs := &http.Server{Handler: e.rcv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	closers = append(closers, func() { _ = hs.Close() })
	url := "http://" + ln.Addr().String() + "/events"
	e.dir, err = os.MkdirTemp("", "ferry-demo-")
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = os.RemoveAll(e.dir) })
	e.config = filepath.Join(e.dir, "ferry.yaml")
	body := fmt.Sprintf(demoConfig, srv.URI(), demoGroup, srv.URI(), partitions, ttl, url)
	if err := os.WriteFile(e.config, []byte(body), 0o600); err != nil {
		return fail(err)
	}
	e.ls, err = lease.New(e.client.Database("ferry"))
	if err != nil {
		return fail(err)
	}
	return e, nil
}

// demoMember is one `ferry run` process.
type demoMember struct {
	id  string
	cmd *exec.Cmd
	log *bytes.Buffer // its stderr, shown when the demo fails
}

// startMember runs `ferry run -c <config>` as a process named id.
func (e *demoEnv) startMember(ctx context.Context, id string) (*demoMember, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "run", "-c", e.config)
	env := []string{"FERRY_DEMO_SECRET=" + e.secret, "FERRY_MEMBER_ID=" + id, demoChildEnv + "=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PORT=") { // the ops port is the file's listen:
			env = append(env, kv)
		}
	}
	cmd.Env = env
	m := &demoMember{id: id, cmd: cmd, log: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = io.Discard, &syncWriter{w: m.log}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return m, nil
}

// demoChildEnv marks a member process started by the demo: the demo
// binary run as `demo run -c <file>` is `ferry run`; under go test the
// binary is the test binary, whose TestMain runs the ferry command line it
// is given when the mark is set.
const demoChildEnv = "FERRY_DEMO_CHILD"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		os.Exit(cli.Main()) // a member: ferry run
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runDemo(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, new(*usageError)):
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "demo:", err)
	os.Exit(1)
}

// usageError is a bad command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

// syncWriter serialises writes (exec copies stderr from a goroutine).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// owners returns partition → live lease owner.
func (e *demoEnv) owners(ctx context.Context) map[int]string {
	list, _ := e.ls.List(ctx, demoGroup)
	return lease.Owners(list)
}

// waitOwned waits until every partition has a live owner for which ok
// holds, and returns how long that took.
func (e *demoEnv) waitOwned(ctx context.Context, ok func(string) bool) (time.Duration, error) {
	start := time.Now()
	for {
		good := 0
		for _, o := range e.owners(ctx) {
			if ok(o) {
				good++
			}
		}
		if good == e.partitions {
			return time.Since(start), nil
		}
		if ctx.Err() != nil {
			return 0, errors.New("partitions were not all owned in time")
		}
		time.Sleep(10 * time.Millisecond) // polling the leases, not synchronisation
	}
}

// waitBalanced waits until the partitions are spread over exactly n
// members.
func (e *demoEnv) waitBalanced(ctx context.Context, n int) error {
	for {
		own := e.owners(ctx)
		per := map[string]int{}
		for _, o := range own {
			per[o]++
		}
		if len(own) == e.partitions && len(per) == n && balanced(per, e.partitions) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the group did not balance over %d members in time: %s", n, describeOwners(own))
		}
		time.Sleep(10 * time.Millisecond) // polling the leases, not synchronisation
	}
}

// balanced reports whether per (member → partitions owned) spreads
// partitions evenly: every member within one of the others.
func balanced(per map[string]int, partitions int) bool {
	lo, hi := partitions, 0
	for _, k := range per {
		lo, hi = min(lo, k), max(hi, k)
	}
	return hi-lo <= 1
}

// runDemo: the emulator, a TTL-indexed collection, a webhook receiver and
// three `ferry run` member processes; one member is killed with SIGKILL
// halfway through the writes. It ends with one line scripts can check.
// With -takeover-runs N it measures instead how long partitions take to
// move after a SIGKILL and after a SIGTERM, N times each, with -members
// members, -partitions partitions and -lease-ttl.
func runDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	n := fs.Int("n", 200, "number of documents to write")
	runs := fs.Int("takeover-runs", 0, "measure the takeover after SIGKILL and after SIGTERM this many times each, and the rebalance after a join, and print min/median/max")
	partitions := fs.Int("partitions", demoPartitions, "with -takeover-runs: the group's partition count")
	members := fs.Int("members", 2, "with -takeover-runs: how many ferry run members share the partitions (at least 2)")
	ttl := fs.Duration("lease-ttl", demoLeaseTTL, "with -takeover-runs: the group's lease_ttl")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err}
	}
	if *n < 2 {
		return &usageError{fmt.Errorf("-n must be at least 2, got %d", *n)}
	}
	if *runs < 0 {
		return &usageError{fmt.Errorf("-takeover-runs must not be negative, got %d", *runs)}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"partitions", "members", "lease-ttl"} {
		if set[name] && *runs == 0 {
			return &usageError{fmt.Errorf("-%s goes with -takeover-runs (the walk-through runs %d partitions on 3 members, lease_ttl %s)", name, demoPartitions, demoLeaseTTL)}
		}
	}
	switch {
	case *partitions < 1:
		return &usageError{fmt.Errorf("-partitions must be at least 1, got %d", *partitions)}
	case *members < 2:
		return &usageError{fmt.Errorf("-members must be at least 2 (one is killed, the others take over), got %d", *members)}
	case *ttl < 100*time.Millisecond:
		return &usageError{fmt.Errorf("-lease-ttl must be at least 100ms (ferry run's minimum), got %v", *ttl)}
	}
	e, err := startDemoEnv(ctx, *partitions, *ttl)
	if err != nil {
		return err
	}
	defer e.stop()
	if *runs > 0 {
		return e.measureTakeovers(ctx, *runs, *members, out)
	}
	return e.demo(ctx, *n, out)
}

func (e *demoEnv) demo(ctx context.Context, n int, out io.Writer) (err error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	fmt.Fprintf(out, "emulator:  %s (TTL monitor every 100ms)\n", e.srv.URI())
	fmt.Fprintf(out, "receiver:  Standard Webhooks signatures, idempotent by webhook-id\n")
	fmt.Fprintf(out, "config:    %s (idempotent delivery, %d partitions, lease_ttl %s, every other setting ferry run's default)\n",
		e.config, demoPartitions, demoLeaseTTL)

	members := map[string]*demoMember{}
	defer func() {
		for _, m := range members {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, m := range members {
			_ = m.cmd.Wait()
			if err != nil {
				fmt.Fprintf(out, "--- %s's log:\n%s", m.id, m.log.String())
			}
		}
	}()
	for _, id := range []string{"member-a", "member-b", "member-c"} {
		m, err := e.startMember(ctx, id)
		if err != nil {
			return err
		}
		members[id] = m
	}
	if err := e.waitBalanced(ctx, 3); err != nil {
		return err
	}
	fmt.Fprintf(out, "members:   3 ferry run processes, %d partitions: %s\n", demoPartitions, describeOwners(e.owners(ctx)))
	// The consumers record their start before reading.
	for {
		c, _ := e.client.Database("ferry").Collection("checkpoints").CountDocuments(ctx, bson.D{{Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		if c >= demoPartitions {
			break
		}
		if ctx.Err() != nil {
			return errors.New("consumers did not start in time")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Writes; the member owning partition 0 is killed halfway.
	victim := e.owners(ctx)[0]
	var took chan time.Duration // the takeover after the kill (0: not seen)
	now := e.srv.Now()
	for i := 0; i < n; i++ {
		doc := bson.D{{Key: "_id", Value: fmt.Sprintf("session-%04d", i)}, {Key: "user", Value: i % 17},
			{Key: "expireAt", Value: now.Add(time.Duration(30+i%30) * time.Minute)}}
		if _, err := e.coll.InsertOne(ctx, doc); err != nil {
			return err
		}
		if i == n/2 {
			_ = members[victim].cmd.Process.Signal(syscall.SIGKILL)
			_ = members[victim].cmd.Wait()
			delete(members, victim)
			fmt.Fprintf(out, "killed:    %s with SIGKILL after %d writes\n", victim, i+1)
			took = make(chan time.Duration, 1)
			go func() {
				d, err := e.waitOwned(ctx, func(o string) bool { return o != victim })
				if err != nil {
					d = 0
				}
				took <- d
			}()
		}
		time.Sleep(5 * time.Millisecond) // a steady write rate, not synchronisation
	}
	// The takeover first: moving the server's clock (below) would expire
	// the dead member's leases at once, and the figure would not be the
	// lease's.
	takeover := <-took
	// Every session expires: the TTL monitor deletes them all.
	e.srv.AdvanceClock(2 * time.Hour)
	for {
		left, err := e.coll.CountDocuments(ctx, bson.D{})
		if err != nil {
			return err
		}
		if left == 0 {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d documents never expired", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := 2 * n // an insert and an expiry (delete) per document
	for e.rcv.applied() < want && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	// The two survivors share the partitions again.
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
	_ = e.waitBalanced(bctx, 2)
	bcancel()
	applied, redelivered, inserts, deletes := e.rcv.stats()
	lost := e.rcv.missing(n)
	fmt.Fprintf(out, "after:     %s\n", describeOwners(e.owners(ctx)))
	fmt.Fprintf(out, "written:   %d documents with a TTL; expired: %d (delete events delivered)\n", n, deletes)
	fmt.Fprintf(out, "delivered: %d events applied once each (%d inserts, %d expiries); %d redeliveries absorbed by the receiver\n",
		applied, inserts, deletes, redelivered)
	fmt.Fprintf(out, "takeover:  %d ms after the kill (lease_ttl %d ms: a crashed member's partitions move within lease_ttl + lease_ttl/4)\n",
		takeover.Milliseconds(), demoLeaseTTL.Milliseconds())
	fmt.Fprintf(out, "demo: written=%d expired=%d delivered=%d duplicates=%d lost=%d takeover_ms=%d\n",
		n, deletes, applied, e.rcv.duplicateEffects(), lost, takeover.Milliseconds())
	if lost != 0 || e.rcv.duplicateEffects() != 0 {
		return fmt.Errorf("lost %d events, %d duplicate effects", lost, e.rcv.duplicateEffects())
	}
	return nil
}

// measureTakeovers measures, runs times each, how long the partitions of a
// member take to be owned by the others after it is sent SIGKILL (a crash)
// and SIGTERM (a graceful stop), with members `ferry run` members, and how
// long the partitions take to spread over every member again after a new
// member starts (a join). It prints the min, median and max of each, and
// fails when a takeover after SIGKILL took longer than the documented
// bound, lease_ttl × 1.25 + 1 s.
func (e *demoEnv) measureTakeovers(ctx context.Context, runs, members int, out io.Writer) (err error) {
	perRun := 4*takeoverBound(e.ttl) + 30*time.Second + time.Duration(e.partitions)*100*time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, time.Duration(runs)*perRun)
	defer cancel()
	fmt.Fprintf(out, "config:    %s (%d partitions, lease_ttl %s, %d members)\n", e.config, e.partitions, e.ttl, members)
	seq := 0
	start := func() (*demoMember, error) {
		seq++
		return e.startMember(ctx, fmt.Sprintf("member-%d", seq))
	}
	live := []*demoMember{}
	defer func() {
		for _, m := range live {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			_ = m.cmd.Wait()
			if err != nil {
				fmt.Fprintf(out, "--- %s's log:\n%s", m.id, m.log.String())
			}
		}
	}()
	for len(live) < members {
		m, err := start()
		if err != nil {
			return err
		}
		live = append(live, m)
	}
	if err := e.waitBalanced(ctx, members); err != nil {
		return err
	}
	results := map[string][]time.Duration{}
	for i := 0; i < runs; i++ {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
			victim := live[0]
			live = live[1:]
			_ = victim.cmd.Process.Signal(sig)
			d, err := e.waitOwned(ctx, func(o string) bool { return o != victim.id })
			if err != nil {
				return err
			}
			_ = victim.cmd.Wait()
			results[sigName(sig)] = append(results[sigName(sig)], d)
			// A join: a new member, until the partitions are spread over
			// every member again (measured from its process's start).
			joined := time.Now()
			m, err := start()
			if err != nil {
				return err
			}
			live = append(live, m)
			if err := e.waitBalanced(ctx, members); err != nil {
				return err
			}
			results["join"] = append(results["join"], time.Since(joined))
		}
	}
	bound := takeoverBound(e.ttl)
	var exceeded error
	for _, what := range []string{"sigkill", "sigterm", "join"} {
		ds := results[what]
		sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
		label := "takeover after " + strings.ToUpper(what)
		if what == "join" {
			label = "rebalance after a join"
		}
		note := ""
		switch what {
		case "sigkill":
			verdict := "within"
			if ds[len(ds)-1] > bound {
				verdict = "EXCEEDS"
				exceeded = fmt.Errorf("a takeover after SIGKILL took %d ms, more than lease_ttl × 1.25 + 1 s = %d ms", ds[len(ds)-1].Milliseconds(), bound.Milliseconds())
			}
			note = fmt.Sprintf("; %s the bound lease_ttl × 1.25 + 1 s = %dms", verdict, bound.Milliseconds())
		case "join":
			note = "; from the new member's start until every member owns its share"
		}
		fmt.Fprintf(out, "%s: runs=%d min=%dms median=%dms max=%dms (partitions %d, members %d, lease_ttl %dms%s)\n",
			label, len(ds), ds[0].Milliseconds(), ds[len(ds)/2].Milliseconds(), ds[len(ds)-1].Milliseconds(),
			e.partitions, members, e.ttl.Milliseconds(), note)
	}
	return exceeded
}

// takeoverBound is the documented bound on a takeover after a crash: the
// lease TTL, a rebalance interval (a quarter of it) and a second.
func takeoverBound(ttl time.Duration) time.Duration { return ttl + ttl/4 + time.Second }

func sigName(s syscall.Signal) string {
	if s == syscall.SIGKILL {
		return "sigkill"
	}
	return "sigterm"
}

func describeOwners(own map[int]string) string {
	per := map[string][]int{}
	for p, o := range own {
		per[o] = append(per[o], p)
	}
	var names []string
	for o := range per {
		names = append(names, o)
	}
	sort.Strings(names)
	var parts []string
	for _, o := range names {
		sort.Ints(per[o])
		parts = append(parts, fmt.Sprintf("%s %v", o, per[o]))
	}
	return strings.Join(parts, ", ")
}

// demoReceiver verifies each delivery's signature and applies each event
// once, keyed by webhook-id (the event id), as a receiver should. The
// effect it applies is counted by business key (operation + document _id),
// so a change delivered twice under different ids, or a dedupe that failed,
// would show up as a duplicate effect.
type demoReceiver struct {
	key     []byte
	mu      sync.Mutex
	seen    map[string]string // event id → operation
	dups    int               // deliveries of an already applied event
	effects map[string]int    // operation/_id → times applied
}

func newDemoReceiver(key []byte) *demoReceiver {
	return &demoReceiver{key: key, seen: map[string]string{}, effects: map[string]int{}}
}

func (d *demoReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	var t int64
	if _, err := fmt.Sscan(ts, &t); err != nil {
		http.Error(w, "bad timestamp", http.StatusUnauthorized)
		return
	}
	if !strings.Contains(r.Header.Get("webhook-signature"), webhook.Sign(d.key, id, t, body)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev struct {
		OperationType string `bson:"operationType"`
		DocumentKey   struct {
			ID string `bson:"_id"`
		} `bson:"documentKey"`
	}
	if err := bson.UnmarshalExtJSON(body, false, &ev); err != nil {
		http.Error(w, "not a change event", http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[id]; ok {
		d.dups++ // idempotent: acknowledged, not applied again
		return
	}
	d.seen[id] = ev.OperationType
	d.effects[ev.OperationType+"/"+ev.DocumentKey.ID]++
}

func (d *demoReceiver) applied() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}

// duplicateEffects counts business effects applied more than once.
func (d *demoReceiver) duplicateEffects() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, k := range d.effects {
		n += k - 1
	}
	return n
}

// missing counts the expected effects (an insert and an expiry per
// document) that never happened.
func (d *demoReceiver) missing(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := 0
	for i := 0; i < n; i++ {
		for _, op := range []string{"insert", "delete"} {
			if d.effects[fmt.Sprintf("%s/session-%04d", op, i)] == 0 {
				m++
			}
		}
	}
	return m
}

func (d *demoReceiver) stats() (applied, redelivered, inserts, deletes int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, op := range d.seen {
		switch op {
		case "insert":
			inserts++
		case "delete":
			deletes++
		}
	}
	return len(d.seen), d.dups, inserts, deletes
}
