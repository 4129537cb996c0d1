package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/internal/cli"
)

func TestMain(m *testing.M) {
	// lasthop re-executes its own binary as `ferry run` sidecars; under go
	// test that binary is this test binary, which then runs the ferry
	// command line it was given.
	if os.Getenv(childEnv) != "" {
		os.Exit(cli.Main())
	}
	os.Exit(m.Run())
}

// TestStoryKill is the story with a short run: three Node receivers on the
// library and three sidecars, 60 TTL deletes with a 1 s effect, one
// sidecar SIGKILLed while its receiver applies effects. Every delete has
// exactly one effect. It needs node and the example's node_modules; set
// FERRY_REQUIRE_NODE=1 (CI) to fail rather than skip without them.
func TestStoryKill(t *testing.T) {
	if testing.Short() {
		t.Skip("a story run takes about 30 s")
	}
	requireNode(t)
	var out bytes.Buffer
	err := lasthop(context.Background(), []string{"-fault", "kill", "-n", "60"}, &out)
	if err != nil {
		t.Fatalf("lasthop: %v\n%s", err, out.String())
	}
	// Each effect in flight at the kill completes on the victim's receiver
	// and is replayed to another instance's: absorbed, never applied twice.
	if !regexp.MustCompile(`(?m)^run 1 fault=kill effects=60 deletes=60 duplicates=0 lost=0 absorbed=[1-9]\d* landed=yes inflight_at_fault=[1-9]`).MatchString(out.String()) {
		t.Fatalf("run line:\n%s", out.String())
	}
	t.Log(out.String())
}

// TestStoryMemoryDedupeShowsDuplicates: the same run with the pattern the
// library replaces (ids in each receiver's memory) applies the replays
// twice, so the story can fail: each effect in flight at the kill
// completes on the victim's receiver and is replayed to another's, which
// has never seen it.
func TestStoryMemoryDedupeShowsDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("a story run takes about 30 s")
	}
	requireNode(t)
	var out bytes.Buffer
	err := lasthop(context.Background(), []string{"-fault", "kill", "-n", "60", "-dedupe", "memory"}, &out)
	if err != nil {
		t.Fatalf("lasthop: %v\n%s", err, out.String())
	}
	if !regexp.MustCompile(`(?m)^run 1 fault=kill effects=\d+ deletes=60 duplicates=[1-9]\d* lost=0 .*landed=yes`).MatchString(out.String()) {
		t.Fatalf("run line:\n%s", out.String())
	}
	t.Log(out.String())
}

// requireNode skips the test when node or the receiver's modules are
// missing, unless FERRY_REQUIRE_NODE=1.
func requireNode(t *testing.T) {
	t.Helper()
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := findNode(context.Background(), o); err != nil {
		if os.Getenv("FERRY_REQUIRE_NODE") == "1" {
			t.Fatal(err)
		}
		t.Skipf("%v (FERRY_REQUIRE_NODE=1 makes this a failure)", err)
	}
}

func TestFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-fault", "crash"}, `-fault must be kill, redeploy, receiver-down or scale-in, got "crash"`},
		{[]string{"-dedupe", "redis"}, `-dedupe must be library or memory, got "redis"`},
		{[]string{"-runs", "0"}, "-runs must be at least 1, got 0"},
		{[]string{"-n", "5"}, "-n must be at least 20"},
		{[]string{"-lease-ttl", "10ms"}, "-lease-ttl must be at least 100ms"},
		{[]string{"-down", "0s"}, "-down must be positive"},
		{[]string{"-effect-delay", "-1s"}, "-effect-delay must not be negative"},
		{[]string{"-txn-lifetime", "1500ms"}, "-txn-lifetime must be a whole number of seconds"},
		{[]string{"kill"}, `unexpected arguments ["kill"]`},
	} {
		_, err := parseFlags(c.args)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want a usage error containing %q", c.args, err, c.want)
		}
	}
	o, err := parseFlags([]string{"-fault", "receiver-down", "-runs", "3", "-dedupe", "memory"})
	if err != nil || o.fault != faultReceiverDown || o.runs != 3 || o.dedupe != dedupeMemory || o.n != 300 {
		t.Fatalf("good flags: %+v, %v", o, err)
	}
}

// TestJudge: with the library any duplicate or loss fails; with in-memory
// dedupe the absence of duplicates fails (the scenario then proved
// nothing); a run whose fault hit nothing in flight always fails.
func TestJudge(t *testing.T) {
	landed := &faultReport{inflight: 3}
	missed := &faultReport{inflight: 0}
	for _, c := range []struct {
		name    string
		dedupe  string
		results []*result
		want    string // "" = ok
	}{
		{"library clean", dedupeLibrary, []*result{{rep: landed}, {rep: landed}}, ""},
		{"library duplicate", dedupeLibrary, []*result{{rep: landed}, {rep: landed, duplicates: 1}}, "1 duplicate effect(s) over 2 run(s) with the library"},
		{"library lost", dedupeLibrary, []*result{{rep: landed, lost: 2}}, "2 effect(s) lost or wrong"},
		{"unknown id", dedupeLibrary, []*result{{rep: landed, unknown: 1}}, "1 effect(s) lost or wrong"},
		{"not a TTL expiry", dedupeLibrary, []*result{{rep: landed, otherCause: 1}}, "1 effect(s) lost or wrong"},
		{"missed window", dedupeLibrary, []*result{{rep: missed}}, "missed the fault window"},
		{"memory shows duplicates", dedupeMemory, []*result{{rep: landed}, {rep: landed, duplicates: 4}}, ""},
		{"memory without duplicates", dedupeMemory, []*result{{rep: landed}}, "in-memory dedupe showed no duplicate"},
		{"memory lost", dedupeMemory, []*result{{rep: landed, duplicates: 4, lost: 1}}, "1 effect(s) lost or wrong"},
	} {
		var out bytes.Buffer
		err := judge(&settings{fault: faultKill, dedupe: c.dedupe}, c.results, &out)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		case c.want == "" && !strings.HasSuffix(out.String(), " ok\n"), c.want != "" && !strings.HasSuffix(out.String(), " FAILED\n"):
			t.Errorf("%s: summary %q", c.name, out.String())
		}
	}
}

// TestReceiverLines: an event is in flight from its first effect line to
// its delivery line, whatever the outcome and however often its effect
// started (a transaction retried after a conflict).
func TestReceiverLines(t *testing.T) {
	r := &receiver{listening: make(chan struct{}), inflight: map[string]bool{}, outcomes: map[string]int{}, proc: &proc{done: make(chan struct{})}}
	for _, l := range []string{
		`{"msg":"listening","host":"127.0.0.1","port":1,"mode":"library"}`,
		`{"msg":"effect","stream":"s","id":"aaaa"}`,
		`{"msg":"effect","stream":"s","id":"bbbb"}`,
		`{"msg":"effect","stream":"s","id":"aaaa"}`,
		`not json`,
	} {
		r.line(l)
	}
	select {
	case <-r.listening:
	default:
		t.Fatal("the listening line was not noticed")
	}
	if n := r.inFlight(); n != 2 {
		t.Fatalf("in flight: %d, want 2", n)
	}
	r.line(`{"msg":"delivery","stream":"s","id":"aaaa","outcome":"duplicate","status":200,"ms":2100}`)
	r.line(`{"msg":"delivery","stream":"s","id":"cccc","outcome":"in-progress","status":503,"ms":2000}`)
	if n := r.inFlight(); n != 1 {
		t.Fatalf("in flight: %d, want 1", n)
	}
	r.line(`{"msg":"delivery","stream":"s","id":"bbbb","outcome":"applied","status":200,"ms":1000}`)
	if n, d, p := r.inFlight(), r.outcome("duplicate"), r.outcome("in-progress"); n != 0 || d != 1 || p != 1 {
		t.Fatalf("in flight %d, duplicates %d, in progress %d; want 0, 1, 1", n, d, p)
	}
}
