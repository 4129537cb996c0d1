package main

import (
	"bufio"
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
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/webhook"
)

// The demo walks through our first users' problem: documents with a TTL
// expire in MongoDB, and each expiry (and each insert) must trigger work
// exactly once although the service runs as several instances, one of which
// crashes midway.
const (
	demoPartitions = 4
	demoLeaseTTL   = 2 * time.Second
	demoGroup      = "sessions"
)

// runDemo: the emulator, a TTL-indexed collection, a webhook receiver and
// three member processes; one member is killed with SIGKILL halfway through
// the writes. It ends with one line scripts can check.
func runDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(out)
	n := fs.Int("n", 200, "number of documents to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 2 {
		return fmt.Errorf("-n must be at least 2, got %d", *n)
	}
	srv, err := mongotest.Start(mongotest.TTLMonitorInterval(100 * time.Millisecond))
	if err != nil {
		return err
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	coll := client.Database("demo").Collection("sessions")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "expireAt", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		return err
	}
	fmt.Fprintf(out, "emulator:  %s (TTL monitor every 100ms)\n", srv.URI())

	// The receiver: verifies signatures, applies each event once.
	secretBytes := make([]byte, 32)
	_, _ = rand.Read(secretBytes)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(secretBytes)
	rcv := newDemoReceiver(secretBytes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/events"
	fmt.Fprintf(out, "receiver:  %s (Standard Webhooks signatures, idempotent by webhook-id)\n", url)

	// Three members, each its own process.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	members := map[string]*exec.Cmd{}
	for _, id := range []string{"member-a", "member-b", "member-c"} {
		cmd := exec.CommandContext(ctx, self, "demo-member", srv.URI(), id, url)
		cmd.Env = append(os.Environ(), "FERRY_DEMO_SECRET="+secret)
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		members[id] = cmd
	}
	defer func() {
		for _, cmd := range members {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, cmd := range members {
			_ = cmd.Wait()
		}
	}()
	ls, err := lease.New(client.Database("ferry"))
	if err != nil {
		return err
	}
	owners := func() map[int]string {
		list, _ := ls.List(ctx, demoGroup)
		m := map[int]string{}
		for _, l := range list {
			if l.Owner != "" && !l.Expired {
				m[l.Partition] = l.Owner
			}
		}
		return m
	}
	waitOwned := func(ok func(string) bool) (time.Duration, error) {
		start := time.Now()
		for {
			own := owners()
			good := 0
			for _, o := range own {
				if ok(o) {
					good++
				}
			}
			if good == demoPartitions {
				return time.Since(start), nil
			}
			if ctx.Err() != nil {
				return 0, errors.New("partitions were not all owned in time")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := waitOwned(func(string) bool { return true }); err != nil {
		return err
	}
	// Balanced: every member owns some.
	for {
		per := map[string]int{}
		for _, o := range owners() {
			per[o]++
		}
		if len(per) == 3 {
			fmt.Fprintf(out, "members:   3 processes, %d partitions: %s\n", demoPartitions, describeOwners(owners()))
			break
		}
		if ctx.Err() != nil {
			return errors.New("the group did not balance in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The consumers record their start before reading.
	for {
		c, _ := client.Database("ferry").Collection("checkpoints").CountDocuments(ctx, bson.D{{Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		if c >= demoPartitions {
			break
		}
		if ctx.Err() != nil {
			return errors.New("consumers did not start in time")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Writes; the member owning partition 0 is killed halfway.
	victim := owners()[0]
	var takeover time.Duration
	now := srv.Now()
	for i := 0; i < *n; i++ {
		doc := bson.D{{Key: "_id", Value: fmt.Sprintf("session-%04d", i)}, {Key: "user", Value: i % 17},
			{Key: "expireAt", Value: now.Add(time.Duration(30+i%30) * time.Minute)}}
		if _, err := coll.InsertOne(ctx, doc); err != nil {
			return err
		}
		if i == *n/2 {
			_ = members[victim].Process.Signal(syscall.SIGKILL)
			_ = members[victim].Wait()
			delete(members, victim)
			fmt.Fprintf(out, "killed:    %s with SIGKILL after %d writes\n", victim, i+1)
			go func() {
				d, err := waitOwned(func(o string) bool { return o != victim })
				if err == nil {
					takeover = d
				}
			}()
		}
		time.Sleep(5 * time.Millisecond) // a steady write rate, not synchronisation
	}
	// Every session expires: the TTL monitor deletes them all.
	srv.AdvanceClock(2 * time.Hour)
	for {
		left, err := coll.CountDocuments(ctx, bson.D{})
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
	want := 2 * *n // an insert and an expiry (delete) per document
	for rcv.applied() < want && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if takeover == 0 {
		if d, err := waitOwned(func(o string) bool { return o != victim }); err == nil {
			takeover = d
		}
	}
	// The two survivors share the partitions again.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		per := map[string]int{}
		for _, o := range owners() {
			per[o]++
		}
		if len(per) == 2 && len(owners()) == demoPartitions {
			break
		}
	}
	applied, redelivered, inserts, deletes := rcv.stats()
	lost := rcv.missing(*n)
	fmt.Fprintf(out, "after:     %s\n", describeOwners(owners()))
	fmt.Fprintf(out, "written:   %d documents with a TTL; expired: %d (delete events delivered)\n", *n, deletes)
	fmt.Fprintf(out, "delivered: %d events applied once each (%d inserts, %d expiries); %d redeliveries absorbed by the receiver\n",
		applied, inserts, deletes, redelivered)
	fmt.Fprintf(out, "takeover:  %d ms after the kill (lease TTL %d ms)\n", takeover.Milliseconds(), demoLeaseTTL.Milliseconds())
	fmt.Fprintf(out, "demo: written=%d expired=%d delivered=%d duplicates=%d lost=%d takeover_ms=%d\n",
		*n, deletes, applied, rcv.duplicateEffects(), lost, takeover.Milliseconds())
	if lost != 0 || rcv.duplicateEffects() != 0 {
		return fmt.Errorf("lost %d events, %d duplicate effects", lost, rcv.duplicateEffects())
	}
	return nil
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

// runDemoMember is one member process of the demo: a group member
// delivering the sessions collection's changes to the receiver.
func runDemoMember(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: ferry demo-member URI MEMBER-ID RECEIVER-URL")
	}
	uri, id, url := args[0], args[1], args[2]
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	s, err := webhook.New(url, webhook.Secret(os.Getenv("FERRY_DEMO_SECRET")))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := s.Connect(ctx); err != nil {
		return err
	}
	defer s.Close(context.Background())
	g, err := group.New(client, sink.Handler(s), group.Name(demoGroup), group.Partitions(demoPartitions),
		group.MemberID(id), group.StateDatabase(client.Database("ferry")), group.DeliveryMode(group.Idempotent),
		group.LeaseTTL(demoLeaseTTL), group.RebalanceInterval(100*time.Millisecond),
		group.LeaseOptions(lease.MemberTimeout(demoLeaseTTL), lease.HeartbeatInterval(demoLeaseTTL/5)),
		group.Consumer(ferry.WatchCollection("demo", "sessions"), ferry.MaxAwaitTime(50*time.Millisecond),
			ferry.CommitEvery(20, 50*time.Millisecond)))
	if err != nil {
		return err
	}
	fmt.Fprintln(bufio.NewWriter(os.Stdout), "member", id, "started")
	return g.Run(ctx)
}
