// Package leakcheck fails a test binary whose tests leave goroutines
// behind, in the manner of go.uber.org/goleak's VerifyTestMain, without a
// dependency: the library's module requires nothing but the MongoDB
// driver (and bbolt), tests included.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// VerifyTestMain runs the tests and then fails (exit 1, the leaked
// goroutines' stacks on stderr) if goroutines other than the runtime's
// and the test framework's are still running after a grace period in
// which they may finish.
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := Leaked(5 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: %d goroutine(s) outlived the tests:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// Leaked polls for up to grace until no unexpected goroutine runs, and
// returns the stacks of those still running then.
func Leaked(grace time.Duration) []string {
	deadline := time.Now().Add(grace)
	for {
		leaked := unexpected()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(10 * time.Millisecond) // polling the runtime's goroutines
	}
}

// ignored are the top functions of goroutines that belong to the runtime,
// the test framework or the standard library's process-wide helpers.
var ignored = []string{
	"testing.Main(",
	"testing.(*M).",
	"testing.tRunner(",
	"testing.runTests(",
	"testing.(*T).Run(",
	"testing.(*T).Parallel(",
	"os/signal.signal_recv(",
	"os/signal.loop(",
	"runtime.ensureSigM(",
	"runtime.goexit(",
	"created by runtime.gc",
	"runtime.MHeap_Scavenger(",
	"runtime/trace.Start.func1(",
	"internal/poll.runtime_pollWait(", // checked below with its creator
}

func unexpected() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // this goroutine
		}
		if !expected(g) {
			out = append(out, g)
		}
	}
	return out
}

func expected(g string) bool {
	lines := strings.Split(strings.TrimSpace(g), "\n")
	if len(lines) < 2 {
		return true
	}
	top := lines[1]
	creator := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "created by ") {
			creator = l
		}
	}
	for _, s := range ignored {
		if strings.HasPrefix(top, s) || strings.HasPrefix(creator, s) {
			if s == "internal/poll.runtime_pollWait(" {
				// A blocked read is the test framework's only when the
				// test runner created it.
				return strings.Contains(creator, "testing.")
			}
			return true
		}
	}
	// A goroutine the test framework started and is waiting in.
	return strings.Contains(creator, "created by testing.") && strings.Contains(g, "testing.")
}
