package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// The receiver child holds a sink's destination: the other end of the
// stdout pipe, an HTTP server answering 200, kfake, an embedded
// nats-server with JetStream, pstest, or (for the projection) a client
// watching the target's count. It counts what arrives and notes the first
// event and the moment every event has arrived, so the bench measures
// between the two while its own process runs nothing but the daemon. Its
// CPU is its own (reported as the receiver's), not Ferry's.

// The receiver's environment.
const (
	sinkEnv   = "FERRY_BENCH_SINK"   // the destination: stdout, webhook, kafka, nats, pubsub, mongodb
	targetEnv = "FERRY_BENCH_TARGET" // how many distinct events make "done"
	uriEnv    = "FERRY_BENCH_URI"    // mongodb: the cluster
	nsEnv     = "FERRY_BENCH_NS"     // mongodb: the projection's database.collection
)

// pollEvery is how often a destination that cannot count as events
// arrive (Kafka, JetStream, the projection) is asked how many it holds.
const pollEvery = 5 * time.Millisecond

// destination is one sink's receiving end.
type destination interface {
	// counts says what the destination holds now; verify may take longer
	// to say exactly (Kafka reads its topic back).
	counts(ctx context.Context, verify bool) (counts, error)
	close()
}

// startDestination starts the destination named by kind; it reports to c.
type startDestination func(ctx context.Context, c *counter, r *ready) (destination, error)

var destinations = map[string]startDestination{
	"stdout":  startPipe,
	"webhook": startWebhook,
	"kafka":   startKafka,
	"nats":    startNATS,
	"pubsub":  startPubSub,
	"mongodb": startProjectionWatch,
}

func runReceiver(out *childOut) error {
	kind := os.Getenv(sinkEnv)
	start, ok := destinations[kind]
	if !ok {
		return fmt.Errorf("%s=%q names no destination", sinkEnv, kind)
	}
	target, err := strconv.ParseInt(os.Getenv(targetEnv), 10, 64)
	if err != nil || target < 1 {
		return fmt.Errorf("%s=%q is not a positive count", targetEnv, os.Getenv(targetEnv))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &counter{target: target, notify: func(note string, count int64) { out.send(message{Kind: "note", Note: note, Count: count}) }}
	var r ready
	d, err := start(ctx, c, &r)
	if err != nil {
		return err
	}
	defer d.close()
	out.send(message{Kind: "ready", Ready: &r})
	out.serve(os.Stdin, func(cmd string) message {
		switch cmd {
		case "counts", "verify":
			n, err := d.counts(ctx, cmd == "verify")
			if err != nil {
				return message{Error: err.Error()}
			}
			return message{Counts: &n}
		}
		return message{Error: fmt.Sprintf("unknown command %q", cmd)}
	})
	return nil
}

// counter counts a destination's events and sends the notes: "first" when
// the first arrives, "done" when target distinct events have.
type counter struct {
	target int64
	notify func(note string, count int64)

	mu       sync.Mutex
	total    int64
	ids      map[string]struct{} // distinct event ids, for destinations that count by id
	distinct int64               // for destinations that count themselves (set)
	first    bool
	done     bool
}

// add counts one arrival of the event id.
func (c *counter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]struct{}{}
	}
	c.total++
	c.ids[id] = struct{}{}
	c.distinct = int64(len(c.ids))
	c.check()
}

// set records what a destination that counts itself holds: total
// arrivals and distinct events (-1: it cannot tell; total then decides
// "done").
func (c *counter) set(total, distinct int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total, c.distinct = total, distinct
	c.check()
}

// check sends the notes that became true; c.mu is held.
func (c *counter) check() {
	have := c.distinct
	if have < 0 {
		have = c.total
	}
	if !c.first && have > 0 {
		c.first = true
		c.notify("first", have)
	}
	if !c.done && have >= c.target {
		c.done = true
		c.notify("done", have)
	}
}

// get returns the totals so far.
func (c *counter) get() (total, distinct int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.distinct
}

// isDone says whether "done" was sent.
func (c *counter) isDone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// poll asks probe every pollEvery until the counter is done or ctx ends.
func poll(ctx context.Context, c *counter, probe func(context.Context) (total, distinct int64, err error)) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for !c.isDone() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if total, distinct, err := probe(ctx); err == nil {
			c.set(total, distinct)
		}
	}
}

// startReceiver starts a receiver child for the sink of cfg expecting n
// distinct events; for the projection it watches ns on uri. pipe, when
// not nil, is the read end of the stdout sink's pipe.
func startReceiver(sinkKind string, n int, uri, ns string, pipe *os.File) (*child, error) {
	env := []string{sinkEnv + "=" + sinkKind, targetEnv + "=" + strconv.Itoa(n), uriEnv + "=" + uri, nsEnv + "=" + ns}
	if pipe != nil {
		return startChild("receiver", env, pipe)
	}
	return startChild("receiver", env)
}
