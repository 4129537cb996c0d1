package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
)

// receiver is one Node receiver process (examples/node-receiver/server.js)
// run with LOG_DELIVERIES=1: from its stdout lines it knows, live, which
// events have an effect in flight (started, the delivery not yet
// answered) and how each delivery was answered. A delivery may start its
// effect more than once (its transaction hit a conflict and was retried),
// so an event is in flight from its first "effect" line to its
// "delivery" line, whatever the outcome.
type receiver struct {
	*proc
	instance string
	port     int

	listening chan struct{} // closed at its "listening" line
	mu        sync.Mutex
	heard     bool
	inflight  map[string]bool // shortened event ids with an effect started, not answered
	outcomes  map[string]int  // delivery outcome → deliveries
}

// startReceiver starts the receiver of instance on port.
func (e *runEnv) startReceiver(instance string, port int) (*receiver, error) {
	r := &receiver{instance: instance, port: port, listening: make(chan struct{}), inflight: map[string]bool{}, outcomes: map[string]int{}}
	cmd := exec.Command(e.node.path, e.opt.server)
	cmd.Dir = filepath.Dir(e.opt.server)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"WEBHOOK_SECRET=" + e.secret,
		"MONGODB_URI=" + e.srv.URI(),
		"DB=" + effectsDB,
		"EFFECTS_COLLECTION=" + effectsColl,
		"TTL_FIELD=expireAt",
		"HOST=127.0.0.1",
		"PORT=" + strconv.Itoa(port),
		"EFFECT_DELAY_MS=" + strconv.FormatInt(e.opt.effectDelay.Milliseconds(), 10),
		"DRAIN_MS=8000", // Cloud Run kills 10 s after SIGTERM
		"INSTANCE=" + instance,
		"LOG_DELIVERIES=1",
	}
	if e.opt.dedupe == dedupeMemory {
		cmd.Env = append(cmd.Env, "DEDUPE=memory")
	}
	p, err := startProc(e.procName(instance), e.dir, cmd, r.line)
	if err != nil {
		return nil, err
	}
	r.proc = p
	e.mu.Lock()
	e.receivers = append(e.receivers, r)
	e.mu.Unlock()
	return r, nil
}

// line reads one stdout line of the receiver.
func (r *receiver) line(s string) {
	var m struct {
		Msg     string `json:"msg"`
		ID      string `json:"id"`
		Outcome string `json:"outcome"`
	}
	if json.Unmarshal([]byte(s), &m) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch m.Msg {
	case "listening":
		if !r.heard {
			r.heard = true
			close(r.listening)
		}
	case "effect":
		r.inflight[m.ID] = true
	case "delivery":
		r.outcomes[m.Outcome]++
		delete(r.inflight, m.ID)
	}
}

// waitListening waits for the receiver's "listening" line.
func (r *receiver) waitListening(ctx context.Context) error {
	select {
	case <-r.listening:
		return nil
	case <-r.done:
		return fmt.Errorf("receiver %s exited before listening (%v): see %s", r.instance, r.err, r.logPath)
	case <-ctx.Done():
		return fmt.Errorf("receiver %s did not listen in time: see %s", r.instance, r.logPath)
	}
}

// inFlight returns how many events have an effect started and the
// delivery not yet answered. Once the process is gone, none.
func (r *receiver) inFlight() int {
	if r.exited() {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}

// outcome returns how many deliveries it answered with outcome.
func (r *receiver) outcome(o string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[o]
}
