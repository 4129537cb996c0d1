package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/lease"
	"github.com/ferry-io/ferry/mongotest"
)

// The user's setup.
const (
	streamName  = "sessions-expired"
	partitions  = 2
	instances   = 3
	sourceDB    = "shop"
	sourceColl  = "sessions"
	effectsDB   = "app"
	effectsColl = "effects"
	stateDB     = "ferry"
	// ttlInterval is the emulator's TTL monitor pass (a real server's is 60 s).
	ttlInterval = 500 * time.Millisecond
)

// sidecarConfig is the configuration every sidecar runs with: the user's
// sessions-expired stream (examples/cloudrun/ferry.yaml), the emulator as
// source and state store. Each process gets its own ops port, member id
// and receiver URL from its environment, as each Cloud Run instance has
// its own localhost.
const sidecarConfig = `# Written by lasthop; every sidecar runs: ferry run -c <this file>
listen: "${LASTHOP_LISTEN}"
log: {level: info}
state:
  uri: %q
  database: %s
streams:
  - name: %s
    source:
      uri: %q
      scope: {collection: %s.%s}
      pipeline:
        - $match:
            operationType: delete
      full_document_before_change: required
      start_at: now
    group:
      partitions: %d
      lease_ttl: %s
      member_id: ${FERRY_MEMBER_ID}
    delivery: {mode: idempotent}
    sink:
      webhook:
        url: ${LASTHOP_RECEIVER_URL}
        secret: ${WEBHOOK_SECRET}
        timeout: 10s
`

// runEnv is one run: a fresh emulator, the source and effects
// collections, the sidecars' configuration, and the processes.
type runEnv struct {
	opt    *settings
	node   *nodeRuntime
	run    int
	dir    string
	srv    *mongotest.Server
	client *mongo.Client
	source *mongo.Collection
	secret string
	config string
	leases *lease.Store

	live    []*instance // the current instances
	retired []*proc     // processes of replaced instances (redeploy)

	mu        sync.Mutex     // instances start concurrently
	receivers []*receiver    // every receiver process of the run
	names     map[string]int // process names used, for their log files
}

func newRunEnv(ctx context.Context, o *settings, node *nodeRuntime, run int) (_ *runEnv, err error) {
	e := &runEnv{opt: o, node: node, run: run, names: map[string]int{}}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.dir, err = os.MkdirTemp("", fmt.Sprintf("ferry-lasthop-%d-", run)); err != nil {
		return nil, err
	}
	if e.srv, err = mongotest.Start(mongotest.TTLMonitorInterval(ttlInterval)); err != nil {
		return nil, err
	}
	if e.client, err = mongo.Connect(options.Client().ApplyURI(e.srv.URI())); err != nil {
		return nil, err
	}
	if err := e.client.Database("admin").RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1},
		{Key: "transactionLifetimeLimitSeconds", Value: int32(o.txnLifetime / time.Second)}}).Err(); err != nil {
		return nil, fmt.Errorf("setting transactionLifetimeLimitSeconds: %w", err)
	}
	// The source: pre-images on (TTL deletes carry the document), a TTL
	// index on expireAt.
	db := e.client.Database(sourceDB)
	if err := db.CreateCollection(ctx, sourceColl); err != nil {
		return nil, err
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: sourceColl},
		{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(); err != nil {
		return nil, fmt.Errorf("enabling pre-images: %w", err)
	}
	e.source = db.Collection(sourceColl)
	if _, err := e.source.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "expireAt", Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0)}); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	e.secret = "whsec_" + base64.StdEncoding.EncodeToString(key)
	e.config = filepath.Join(e.dir, "ferry.yaml")
	body := fmt.Sprintf(sidecarConfig, e.srv.URI(), stateDB, streamName, e.srv.URI(), sourceDB, sourceColl, partitions, e.opt.leaseTTL)
	if err := os.WriteFile(e.config, []byte(body), 0o600); err != nil {
		return nil, err
	}
	if e.leases, err = lease.New(e.client.Database(stateDB)); err != nil {
		return nil, err
	}
	return e, nil
}

// close stops every process left (SIGTERM, then SIGKILL), the client and
// the emulator. The run's directory is removed when keep is false.
func (e *runEnv) close() {
	for _, in := range e.live {
		in.car.signal(syscall.SIGTERM)
	}
	for _, in := range e.live {
		in.car.stop(15 * time.Second)
		in.rcv.stop(12 * time.Second)
	}
	for _, p := range e.retired {
		p.stop(15 * time.Second)
	}
	if e.client != nil {
		_ = e.client.Disconnect(context.Background())
	}
	if e.srv != nil {
		e.srv.Close()
	}
}

// removeDir removes the run's directory.
func (e *runEnv) removeDir() {
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// procName returns a unique log name for a process called base.
func (e *runEnv) procName(base string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names[base]++
	if n := e.names[base]; n > 1 {
		return fmt.Sprintf("%s.%d", base, n)
	}
	return base
}

// instance is one Cloud Run instance: a receiver and the sidecar posting
// to it on localhost.
type instance struct {
	slot   string // a, b, c
	gen    int    // 1, then 2 after a redeploy
	member string // the sidecar's member id
	rcv    *receiver
	car    *proc
}

// startInstance starts instance slot of generation gen: its receiver
// (listening before its sidecar starts, as Cloud Run's container
// dependencies order them), then its sidecar.
func (e *runEnv) startInstance(ctx context.Context, slot string, gen int) (*instance, error) {
	in := &instance{slot: slot, gen: gen, member: fmt.Sprintf("sidecar-%s-%d", slot, gen)}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if in.rcv, err = e.startReceiver(fmt.Sprintf("app-%s-%d", slot, gen), port); err != nil {
		return nil, err
	}
	if err := in.rcv.waitListening(ctx); err != nil {
		in.rcv.signal(syscall.SIGKILL)
		return nil, err
	}
	if in.car, err = e.startSidecar(ctx, in.member, port); err != nil {
		in.rcv.stop(time.Second)
		return nil, err
	}
	return in, nil
}

// startInstances starts the three instances of generation gen at once.
func (e *runEnv) startInstances(ctx context.Context, gen int) ([]*instance, error) {
	type started struct {
		in  *instance
		err error
	}
	ch := make(chan started, instances)
	for i := 0; i < instances; i++ {
		slot := string(rune('a' + i))
		go func() {
			in, err := e.startInstance(ctx, slot, gen)
			ch <- started{in, err}
		}()
	}
	var ins []*instance
	var errs []error
	for i := 0; i < instances; i++ {
		s := <-ch
		if s.err != nil {
			errs = append(errs, s.err)
			continue
		}
		ins = append(ins, s.in)
	}
	if len(errs) > 0 {
		for _, in := range ins {
			in.car.signal(syscall.SIGKILL)
			in.rcv.signal(syscall.SIGKILL)
		}
		return nil, errors.Join(errs...)
	}
	return ins, nil
}

// owners returns partition → the live instance owning it (by lease).
func (e *runEnv) owners(ctx context.Context) map[int]*instance {
	list, _ := e.leases.List(ctx, streamName)
	out := map[int]*instance{}
	for p, m := range lease.Owners(list) {
		for _, in := range e.live {
			if in.member == m {
				out[p] = in
			}
		}
	}
	return out
}

// waitStarted waits until every partition is owned by a live sidecar and
// every partition's consumer recorded where it starts (start_at: now), so
// no delete written after this is before a stream's start.
func (e *runEnv) waitStarted(ctx context.Context) error {
	cps := e.client.Database(stateDB).Collection("checkpoints")
	return pollUntil(ctx, 20*time.Millisecond, func() error {
		if own := e.owners(ctx); len(own) < partitions {
			return fmt.Errorf("%d of %d partitions owned", len(own), partitions)
		}
		c, err := cps.CountDocuments(ctx, bson.D{{Key: "token", Value: bson.D{{Key: "$ne", Value: nil}}}})
		if err != nil || c < partitions {
			return fmt.Errorf("%d of %d partitions' start positions recorded (%v)", c, partitions, err)
		}
		return nil
	})
}

// writeDocs writes n sessions whose expiry times are spread over
// expire-over, starting a second from now (by the emulator's clock, which
// its TTL monitor reads).
func (e *runEnv) writeDocs(ctx context.Context) error {
	now := e.srv.Now()
	docs := make([]any, e.opt.n)
	for i := range docs {
		at := now.Add(time.Second + time.Duration(i)*e.opt.expireOver/time.Duration(e.opt.n))
		docs[i] = bson.D{{Key: "_id", Value: fmt.Sprintf("session-%04d", i)}, {Key: "user", Value: i % 17}, {Key: "expireAt", Value: at}}
	}
	_, err := e.source.InsertMany(ctx, docs)
	return err
}

// freePort returns a port no one listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// childEnviron returns this process's environment without PORT (a
// sidecar listens on its listen: address, as on Cloud Run, where PORT is
// only set in the ingress container), plus kv.
func childEnviron(kv ...string) []string {
	var env []string
	for _, s := range os.Environ() {
		if !strings.HasPrefix(s, "PORT=") {
			env = append(env, s)
		}
	}
	return append(env, kv...)
}

// pollUntil calls cond every interval until it returns nil, or ctx ends
// (then the error says what cond still reported).
func pollUntil(ctx context.Context, interval time.Duration, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-time.After(interval): // polling state, not synchronisation
		}
	}
}
