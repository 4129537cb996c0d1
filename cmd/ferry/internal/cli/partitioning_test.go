package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/internal/poll"
)

// TestUpgradeKeepsHashModPartitioning is the upgrade of a running stream
// as the operator meets it: two `ferry run` members of a 4-partition
// stream that checkpointed under hash-mod partitioning — what every
// stream created before hash-range wrote (its identity is the previous
// digest: TestHashModIdentityIsThePreviousOne; the manual run in the
// branch's report used the previous binary itself) — are stopped while
// the writes go on, and members started with the same configuration,
// group.partitioning unset, take over. They keep hash-mod: each logs it
// once, saying what it costs and how to move (checkpoints_of); no
// partition fails identity-changed; every document written before,
// during (no member running) and after the upgrade reaches the receiver;
// /status says the definition matches the checkpoints.
func TestUpgradeKeepsHashModPartitioning(t *testing.T) {
	t.Parallel()
	e := newProcEnv(t)
	rcv := newReceiver(t)
	cfg := func(partitioning string) string {
		return writeFile(t, strings.Replace(streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""),
			"partitions: 2", "partitions: 4"+partitioning, 1))
	}
	before := cfg(", partitioning: hash-mod")
	a, b := startMember(t, before, "a"), startMember(t, before, "b")
	waitStartedIn(t, e, "orders", 4)
	w := startWriter(t, e, "o", 10*time.Millisecond, 0)
	poll.Until(t, 20*time.Second, rcv.deliveredAtLeast(30))
	a.stop(syscall.SIGTERM)
	b.stop(syscall.SIGTERM)
	stopped := len(w.written())
	poll.Until(t, 10*time.Second, w.wroteAtLeast(stopped+30)) // while no member runs

	after := cfg("")
	a2, b2 := startMember(t, after, "a2"), startMember(t, after, "b2")
	poll.Until(t, 30*time.Second, func() error {
		na, nb := a2.metric(`ferry_partitions_owned{stream="orders"}`), b2.metric(`ferry_partitions_owned{stream="orders"}`)
		if na+nb != 4 {
			return fmt.Errorf("partitions owned: a2 %v, b2 %v; want 4 in all", na, nb)
		}
		return nil
	})
	n := len(w.written())
	poll.Until(t, 10*time.Second, w.wroteAtLeast(n+30)) // after the upgrade
	w.halt()
	sent := w.written()
	poll.Until(t, 30*time.Second, rcv.deliveredAtLeast(len(sent)))
	lost := 0
	for id := range sent {
		if _, ok := rcv.arrival(id); !ok {
			lost++
		}
	}
	t.Logf("%d documents written across the upgrade (%d while no member ran, %d after); lost %d", len(sent), n-stopped,
		len(sent)-n, lost)
	if lost != 0 {
		t.Fatalf("%d of %d documents lost across the upgrade", lost, len(sent))
	}
	for _, m := range []*member{a2, b2} {
		log := m.errOut.String()
		if k := strings.Count(log, "keeps hash-mod partitioning"); k != 1 {
			t.Errorf("%s logs %d times that the stream keeps hash-mod, want once", m.name, k)
		}
		var line string
		for _, l := range m.logLines() {
			if strings.Contains(l, "keeps hash-mod partitioning") {
				line = l
			}
		}
		for _, want := range []string{`"level":"INFO"`, "reads every document at the server 4 times", "checkpoints_of: orders"} {
			if !strings.Contains(line, want) {
				t.Errorf("%s's line does not say %q: %s", m.name, want, line)
			}
		}
		if strings.Contains(log, "identity-changed") || strings.Contains(log, "different stream definition") {
			t.Errorf("%s refused the checkpoints:\n%s", m.name, tail(log, 4000))
		}
	}
	code, body := a2.get("/status")
	var doc statusDoc
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	if s := findStream(&doc, "orders"); s == nil || s.State != "running" || !s.Definition.Matches || len(s.Definition.Checkpoints) != 1 {
		t.Errorf("/status: orders = %+v; want running, its definition matching its checkpoints'", s)
	}
	a2.stop(syscall.SIGTERM)
	b2.stop(syscall.SIGTERM)
}

// TestPositionSetKeepsHashMod: ferry position set on a stopped stream that
// checkpointed under hash-mod writes its positions under hash-mod when
// group.partitioning is unset (as its members run it), saying so; with
// partitioning: hash-range set it writes them under hash-range, and
// members so configured then run the stream without an identity error,
// delivering everything from the position on.
func TestPositionSetKeepsHashMod(t *testing.T) {
	t.Parallel()
	e := newProcEnv(t)
	rcv := newReceiver(t)
	e.srv.AdvanceClock(10 * time.Second) // no member runs yet: no lease expires
	t0 := e.srv.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	cfg := func(partitioning string) string {
		return writeFile(t, strings.Replace(streamYAML(e.srv.URI(), "orders", rcv.url(), "", ""),
			"partitions: 2", "partitions: 2"+partitioning, 1))
	}
	m := startMember(t, cfg(", partitioning: hash-mod"), "m")
	waitStartedIn(t, e, "orders", 2)
	for i := range 10 {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
	}
	poll.Until(t, 30*time.Second, rcv.deliveredIs(10))
	m.stop(syscall.SIGTERM)
	identities := func() []string {
		t.Helper()
		cps, err := mongostore.New(e.client.Database("ferry"))
		if err != nil {
			t.Fatal(err)
		}
		list, err := cps.List(context.Background(), "orders")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cp := range list {
			out = append(out, cp.Identity)
		}
		return out
	}
	mod := identities()
	if len(mod) != 2 || mod[0] != mod[1] {
		t.Fatalf("identities %v, want one for both partitions", mod)
	}

	code, out, errOut := ferryCmd("position", "set", "-c", cfg(""), "-stream", "orders", "-time", t0)
	if code != 0 || !strings.Contains(out, "keeps hash-mod partitioning") {
		t.Fatalf("position set, partitioning unset: exit %d\n%s%s", code, out, errOut)
	}
	if got := identities(); fmt.Sprint(got) != fmt.Sprint(mod) {
		t.Fatalf("position set with partitioning unset wrote identities %v, want the stream's hash-mod %v", got, mod)
	}

	ranged := cfg(", partitioning: hash-range")
	code, out, errOut = ferryCmd("position", "set", "-c", ranged, "-stream", "orders", "-time", t0)
	if code != 0 || strings.Contains(out, "keeps hash-mod") {
		t.Fatalf("position set, partitioning: hash-range: exit %d\n%s%s", code, out, errOut)
	}
	got := identities()
	if len(got) != 2 || got[0] != got[1] || got[0] == mod[0] {
		t.Fatalf("position set with hash-range wrote identities %v, want one other than hash-mod's %s", got, mod[0])
	}
	for i := 10; i < 20; i++ {
		e.insert("orders", bson.D{{Key: "_id", Value: fmt.Sprintf("o-%d", i)}})
	}
	m2 := startMember(t, ranged, "m2")
	poll.Until(t, 30*time.Second, rcv.deliveredIs(20))
	if log := m2.errOut.String(); strings.Contains(log, "different stream definition") || strings.Contains(log, "keeps hash-mod") {
		t.Errorf("m2 did not run the stream under hash-range:\n%s", tail(log, 4000))
	}
	m2.stop(syscall.SIGTERM)
}
