package cli

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/poll"
)

// TestDuplicateMemberIDRefused: a second `ferry run` with the
// group.member_id of a live one exits non-zero at start with a message
// naming the key and the fix; the first keeps its partitions (the same
// lease epochs) and goes on delivering, every event once. Before, the two
// replaced each other's registration at every heartbeat and took the
// partitions from each other (428 duplicate deliveries for 600 events in
// idempotent mode).
func TestDuplicateMemberIDRefused(t *testing.T) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
	first := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	epochs := e.epochs("orders")
	insertOrders(e, 0, 100)
	poll.Until(t, 30*time.Second, rcv.deliveredIs(100))

	second := startMember(t, cfg, "m1")
	// Writes go on while the second process starts.
	insertOrders(e, 100, 300)
	select {
	case <-second.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the second process with member_id m1 still runs after 30 s:\n%s", tail(second.errOut.String(), 4000))
	}
	var exit *exec.ExitError
	if !errors.As(second.err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the second process exited with %v, want exit status 1", second.err)
	}
	log := second.errOut.String()
	for _, want := range []string{
		`ferry run: streams[0].group.member_id: "m1" is already used by another live ferry run process in stream orders`,
		"this process stops and the other keeps running",
		"leave group.member_id unset",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the second process's output lacks %q:\n%s", want, tail(log, 4000))
		}
	}
	if strings.Contains(log, `"msg":"partition assigned"`) {
		t.Errorf("the second process took a partition:\n%s", tail(log, 4000))
	}
	insertOrders(e, 300, 400)
	poll.Until(t, 30*time.Second, rcv.deliveredIs(400))
	select {
	case <-first.done:
		t.Fatalf("the first process exited: %v", first.err)
	default:
	}
	if got := e.epochs("orders"); got != epochs {
		t.Errorf("lease epochs moved from %d to %d: the partitions changed owner", epochs, got)
	}
	rcv.mu.Lock()
	dups := 0
	for _, n := range rcv.ids {
		dups += n - 1
	}
	deliveries := len(rcv.ids)
	rcv.mu.Unlock()
	if dups != 0 || deliveries != 400 {
		t.Errorf("%d events delivered, %d duplicate deliveries; want 400 and 0", deliveries, dups)
	}
	if code, out, errOut := runCLI("status", "-c", cfg); code != 0 || !strings.Contains(out, "1 live member(s)") {
		t.Errorf("ferry status: exit %d:\n%s%s", code, out, errOut)
	}
	first.stop(syscall.SIGTERM)
}

// TestRestartAfterCrashSameMemberID: a process restarted with the
// member_id of one killed by SIGKILL is not refused: it waits for the dead
// registration to expire (lease_ttl after its last heartbeat, by the
// server's clock), takes the partitions once their leases expire, at new
// epochs, and delivers.
func TestRestartAfterCrashSameMemberID(t *testing.T) {
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := writeFile(t, streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""))
	crashed := startMember(t, cfg, "m1")
	waitStartedIn(t, e, "orders", 2)
	insertOrders(e, 0, 50)
	poll.Until(t, 30*time.Second, rcv.deliveredIs(50))
	epochs := e.epochs("orders")
	crashed.stop(syscall.SIGKILL)

	restarted := startMember(t, cfg, "m1")
	insertOrders(e, 50, 100)
	poll.Until(t, 30*time.Second, rcv.deliveredIs(100))
	select {
	case <-restarted.done:
		t.Fatalf("the restarted process exited: %v\n%s", restarted.err, tail(restarted.errOut.String(), 4000))
	default:
	}
	if got := e.epochs("orders"); got != epochs+2 {
		t.Errorf("lease epochs went from %d to %d; want each of the 2 partitions taken at a new epoch", epochs, got)
	}
	log := restarted.errOut.String()
	for _, want := range []string{"another process registered this member id; waiting", "expired without a heartbeat"} {
		if !strings.Contains(log, want) {
			t.Errorf("the restarted process's log lacks %q:\n%s", want, tail(log, 4000))
		}
	}
	restarted.stop(syscall.SIGTERM)
}

// insertOrders inserts orders o-from … o-(to-1).
func insertOrders(e *procEnv, from, to int) {
	for i := from; i < to; i++ {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
	}
}
