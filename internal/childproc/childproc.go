// Package childproc runs test members as child processes, so tests can
// signal them for real (SIGKILL, SIGTERM, SIGSTOP/SIGCONT).
//
// A child process is the test binary itself, re-run with an environment
// variable that carries its spec (a string the package's tests define).
// The package's TestMain hands the variable's name and the function that
// runs a child to [Main] (or calls [RunIfChild] where TestMain lives
// elsewhere): in a child, that function runs instead of the tests.
//
// The parent starts a child with [Start], which reads the child's stdout
// lines as they come: [Child.WaitLine] waits, with a deadline, for a line
// with a given prefix, [Child.Lines] returns those read so far. The parent
// signals the child ([Child.Signal], [Child.Kill]), waits for it
// ([Child.Wait]) and, at the end of the test, whatever is still running is
// killed and reaped.
package childproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RunIfChild runs the child when the environment variable env is set, with
// its value as the spec, and exits: with status 0 if run returns nil, 1
// (after printing the error on stderr) if not. Otherwise it returns.
func RunIfChild(env string, run func(spec string) error) {
	spec := os.Getenv(env)
	if spec == "" {
		return
	}
	if err := run(spec); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Main is a TestMain: in a child (env set) it runs the child, see
// [RunIfChild]; otherwise it runs the tests with tests (for instance one
// that checks for leaked goroutines), or with m.Run and exits with its
// status if tests is nil.
func Main(m *testing.M, env string, run func(spec string) error, tests func(*testing.M)) {
	RunIfChild(env, run)
	if tests == nil {
		os.Exit(m.Run())
	}
	tests(m)
}

// Child is a child process started by [Start]. Its methods that fail the
// test must be called from the test's goroutine.
type Child struct {
	// Name says which child it is in failure messages ("child" unless
	// set).
	Name string

	t   testing.TB
	cmd *exec.Cmd
	eof chan struct{} // closed once stdout is read to its end

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed (and replaced) when a line comes

	waitOnce sync.Once
	waitErr  error
}

// Start starts the test binary as a child with env set to spec; it runs no
// test. The child's stderr is the parent's. When the test ends, the child
// is resumed (if stopped), killed and reaped unless it was waited for.
func Start(t testing.TB, env, spec string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GOTRACEBACK=all: a child sent SIGQUIT (WaitWithin) dumps every
	// goroutine.
	cmd.Env = append(os.Environ(), env+"="+spec, "GOTRACEBACK=all")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{Name: "child", t: t, cmd: cmd, eof: make(chan struct{}), changed: make(chan struct{})}
	go func() {
		defer close(c.eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		// Once waited for, the process is done and these do nothing.
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = c.Wait()
	})
	return c
}

// Lines returns the lines the child printed on stdout so far.
func (c *Child) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// find returns the first line with the prefix, and a channel closed when
// another line comes.
func (c *Child) find(prefix string) (string, bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if strings.HasPrefix(l, prefix) {
			return l, true, nil
		}
	}
	return "", false, c.changed
}

// WaitLine waits until the child has printed a line with the prefix and
// returns the first such line. It fails the test if none came within the
// timeout or the child closed its stdout (exited) without one.
func (c *Child) WaitLine(prefix string, within time.Duration) string {
	c.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		l, ok, changed := c.find(prefix)
		if ok {
			return l
		}
		select {
		case <-changed:
		case <-c.eof:
			// Every line was read before eof: one last look.
			if l, ok, _ := c.find(prefix); ok {
				return l
			}
			c.t.Fatalf("%s exited before printing a %q line; it printed %q", c.Name, prefix, c.Lines())
			return ""
		case <-deadline.C:
			c.t.Fatalf("no %q line within %v; %s printed %q", prefix, within, c.Name, c.Lines())
			return ""
		}
	}
}

// Signal sends sig to the child, failing the test if it cannot.
func (c *Child) Signal(sig os.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signalling %s: %v", c.Name, err)
	}
}

// Kill SIGKILLs the child, waits until it is gone and fails the test
// unless it died of that SIGKILL (and not of anything else before it).
func (c *Child) Kill() {
	c.t.Helper()
	c.Signal(syscall.SIGKILL)
	_ = c.Wait()
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		c.t.Fatalf("%s did not die of SIGKILL: %v (it printed %q)", c.Name, c.cmd.ProcessState, c.Lines())
	}
}

// Wait waits until the child has exited and its stdout is read to the
// end, and returns how it exited: nil for status 0, an *exec.ExitError
// otherwise. It may be called more than once.
func (c *Child) Wait() error {
	c.waitOnce.Do(func() {
		<-c.eof // exec.Cmd.Wait closes stdout: reading comes first
		c.waitErr = c.cmd.Wait()
	})
	return c.waitErr
}

// WaitWithin is Wait with a deadline, for a child expected to exit (after
// SIGTERM, say). A child still running after d is sent SIGQUIT, which makes
// a Go program print every goroutine's stack on its stderr (the parent's)
// and exit, and SIGKILL if it is still there 10s later; WaitWithin then
// reports that it hung instead of blocking the test until its timeout.
func (c *Child) WaitWithin(d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	return fmt.Errorf("%s was still running after %v: sent SIGQUIT (its goroutines are on stderr above); it printed %q", c.Name, d, c.Lines())
}
