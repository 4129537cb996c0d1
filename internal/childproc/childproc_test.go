package childproc_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-io/ferry/internal/childproc"
)

const env = "FERRY_CHILDPROC_TEST_CHILD"

func TestMain(m *testing.M) { childproc.Main(m, env, runChild, nil) }

// runChild: "serve <word>" prints its spec and READY, then waits for
// SIGTERM and prints BYE; "fail" prints a line and fails; "quiet" exits
// at once; "hang" ignores SIGTERM and does not return.
func runChild(spec string) error {
	switch f := strings.Fields(spec); f[0] {
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		fmt.Println("SPEC " + spec)
		fmt.Println("READY")
		<-ctx.Done()
		fmt.Println("BYE")
		return nil
	case "fail":
		fmt.Println("FAILING")
		return errors.New("failed on purpose")
	case "quiet":
		return nil
	case "hang":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("HANGING")
		time.Sleep(time.Hour) // a hung child (a timer keeps it from being a deadlock)
		return nil
	}
	return fmt.Errorf("unknown spec %q", spec)
}

func TestWaitLineAndKill(t *testing.T) {
	c := childproc.Start(t, env, "serve kill me")
	if got := c.WaitLine("SPEC", 30*time.Second); got != "SPEC serve kill me" {
		t.Fatalf("WaitLine = %q, want the spec line", got)
	}
	c.WaitLine("READY", 30*time.Second)
	c.Kill()
	var ee *exec.ExitError
	if err := c.Wait(); !errors.As(err, &ee) {
		t.Fatalf("Wait after Kill = %v, want an exit error", err)
	}
	if lines := c.Lines(); slices.Contains(lines, "BYE") || !slices.Contains(lines, "READY") {
		t.Fatalf("lines %q: want READY, and no BYE after SIGKILL", lines)
	}
}

func TestStopContTermExitsCleanly(t *testing.T) {
	c := childproc.Start(t, env, "serve")
	c.WaitLine("READY", 30*time.Second)
	c.Signal(syscall.SIGSTOP)
	c.Signal(syscall.SIGCONT)
	c.Signal(syscall.SIGTERM)
	if err := c.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("second Wait: %v", err)
	}
	if got := c.Lines(); !slices.Equal(got, []string{"SPEC serve", "READY", "BYE"}) {
		t.Fatalf("lines %q", got)
	}
}

func TestExitStatus(t *testing.T) {
	c := childproc.Start(t, env, "fail")
	c.WaitLine("FAILING", 30*time.Second)
	var ee *exec.ExitError
	if err := c.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("Wait = %v, want exit status 1", err)
	}
}

// fatalTB records the first failure and ends the goroutine, as t.Fatal
// does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// waitLineFails runs WaitLine in a goroutine of its own and returns the
// failure it reported ("" if none).
func waitLineFails(tb *fatalTB, c *childproc.Child, prefix string, within time.Duration) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.WaitLine(prefix, within)
	}()
	<-done
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.msg
}

func TestWaitLineFailsWhenTheChildExits(t *testing.T) {
	tb := &fatalTB{TB: t}
	c := childproc.Start(tb, env, "quiet")
	if msg := waitLineFails(tb, c, "READY", time.Hour); !strings.Contains(msg, "exited before printing") {
		t.Fatalf("failure %q, want one saying the child exited", msg)
	}
}

func TestWaitLineFailsAtTheDeadline(t *testing.T) {
	tb := &fatalTB{TB: t}
	c := childproc.Start(tb, env, "serve")
	c.Name = "the server"
	if msg := waitLineFails(tb, c, "NEVER", 100*time.Millisecond); !strings.Contains(msg, `no "NEVER" line within 100ms; the server printed`) {
		t.Fatalf("failure %q, want one saying no line came in time", msg)
	}
	// The child is still running: the cleanup kills it.
}

// TestWaitWithinDumpsAHungChild: a child that ignores SIGTERM and never
// exits is sent SIGQUIT after the deadline, and WaitWithin reports it.
func TestWaitWithinDumpsAHungChild(t *testing.T) {
	c := childproc.Start(t, env, "hang")
	c.WaitLine("HANGING", 20*time.Second)
	c.Signal(syscall.SIGTERM)
	err := c.WaitWithin(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still running after") {
		t.Fatalf("WaitWithin on a hung child = %v, want a 'still running' error", err)
	}
	var ee *exec.ExitError
	if !errors.As(c.Wait(), &ee) || ee.ExitCode() != 2 {
		t.Errorf("the child exited with %v, want status 2 (Go's exit after SIGQUIT)", c.Wait())
	}
}
