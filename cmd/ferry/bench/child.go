package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The bench's child processes are this binary re-executed with roleEnv
// set (under go test, the test binary, whose TestMain does the same). A
// child speaks JSON lines: on its stdout, one ready message, then a reply
// per command and notes whenever it has news; on its stdin, one command a
// line. It exits when its stdin closes.

// roleEnv names the role a child process plays: emulator or receiver.
const roleEnv = "FERRY_BENCH_ROLE"

// message is one line a child writes.
type message struct {
	Kind   string  `json:"kind"` // ready, reply, note
	Ready  *ready  `json:"ready,omitempty"`
	Usage  *usage  `json:"usage,omitempty"`
	Counts *counts `json:"counts,omitempty"`
	Note   string  `json:"note,omitempty"`  // first, done
	Count  int64   `json:"count,omitempty"` // with a note: the events counted then
	Error  string  `json:"error,omitempty"`
	// Rows: with kind rows, the _ids of the snapshot rows a member's sink
	// took (snapshot.go), as varints (appendRowIDs): a member reports
	// every row, and a JSON number per row cost the member and the bench
	// more CPU than the rows' delivery itself.
	Rows []byte `json:"rows,omitempty"`
	// Member: a member's reply to status.
	Member *memberStatus `json:"member,omitempty"`
}

// ready is what a child tells once it serves.
type ready struct {
	URI         string `json:"uri,omitempty"` // the emulator's
	WebhookURL  string `json:"webhook_url,omitempty"`
	KafkaBroker string `json:"kafka_broker,omitempty"`
	KafkaTopic  string `json:"kafka_topic,omitempty"`
	NATSURL     string `json:"nats_url,omitempty"`
	PubSubAddr  string `json:"pubsub_addr,omitempty"`
	MemberID    string `json:"member_id,omitempty"` // a snapshot member's
}

// counts is what a receiver's destination holds.
type counts struct {
	// Delivered: events received, duplicates included where the
	// destination keeps them.
	Delivered int64 `json:"delivered"`
	// Distinct: distinct events (by event id, or by the destination's own
	// de-duplication: NATS's Nats-Msg-Id, the projection's _id); -1 when the
	// destination cannot tell.
	Distinct int64 `json:"distinct"`
	// How says how they were counted.
	How string `json:"how"`
}

// stampedNote is a note with the moment this process read it and this
// process's usage then.
type stampedNote struct {
	note  string
	count int64
	at    time.Time
	self  usage
}

// child is a child process, seen from the bench.
type child struct {
	role    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	ready   ready
	replies chan message
	notes   chan stampedNote
	exited  chan struct{} // closed when its stdout ends
	stderr  *lockedBuffer
	// rows takes a member's rows messages, in the order it wrote them,
	// on the goroutine that reads its stdout (nil: none expected).
	rows func(ids []int64)
	// stopWait is how long close waits for the child to exit after its
	// stdin closed before it kills it.
	stopWait  time.Duration
	callMu    sync.Mutex
	closeOnce sync.Once
	closeErr  error
}

// startChild runs this binary as a child playing role, with env added to
// the environment and extra as its file descriptors 3, 4, …, and waits
// for its ready message.
func startChild(role string, env []string, extra ...*os.File) (*child, error) {
	return startChildWith(&child{role: role, stopWait: 10 * time.Second}, env, extra...)
}

// startChildWith starts c (its role, rows and stopWait set) as
// startChild does.
func startChildWith(c *child, env []string, extra ...*os.File) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	role := c.role
	c.replies, c.notes, c.exited, c.stderr = make(chan message, 1), make(chan stampedNote, 8), make(chan struct{}), &lockedBuffer{}
	c.cmd = exec.Command(self)
	c.cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	c.cmd.ExtraFiles = extra
	c.cmd.Stderr = c.stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the %s process: %w", role, err)
	}
	first := make(chan message, 1)
	go c.read(out, first)
	select {
	case m := <-first:
		if m.Error != "" {
			c.close()
			return nil, fmt.Errorf("the %s process: %s", role, m.Error)
		}
		c.ready = *m.Ready
		return c, nil
	case <-c.exited:
		c.close()
		return nil, fmt.Errorf("the %s process exited before it was ready: %s", role, c.stderr.tail(2000))
	case <-time.After(60 * time.Second):
		c.close()
		return nil, fmt.Errorf("the %s process was not ready within 60 s: %s", role, c.stderr.tail(2000))
	}
}

// read dispatches the child's messages: the ready message to first,
// replies to c.replies, notes (stamped on arrival) to c.notes.
func (c *child) read(out io.Reader, first chan<- message) {
	defer close(c.exited)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	readied := false
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			fmt.Fprintf(c.stderr, "bench: the %s process wrote %q: %v\n", c.role, sc.Text(), err)
			continue
		}
		switch m.Kind {
		case "ready":
			if readied {
				fmt.Fprintf(c.stderr, "bench: the %s process: %s\n", c.role, m.Error)
				continue
			}
			if m.Ready == nil && m.Error == "" {
				m.Error = "a ready message without its addresses"
			}
			readied = true
			first <- m
		case "note":
			c.notes <- stampedNote{note: m.Note, count: m.Count, at: time.Now(), self: selfUsage()}
		case "rows":
			if c.rows != nil {
				ids, err := rowIDs(m.Rows)
				if err != nil {
					fmt.Fprintf(c.stderr, "bench: the %s process reported rows: %v\n", c.role, err)
				}
				c.rows(ids)
			}
		default:
			c.replies <- m
		}
	}
}

// call sends a command and returns its reply.
func (c *child) call(cmd string) (message, error) {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		return message{}, fmt.Errorf("the %s process: %s: %w", c.role, cmd, err)
	}
	select {
	case m := <-c.replies:
		if m.Error != "" {
			return m, fmt.Errorf("the %s process: %s: %s", c.role, cmd, m.Error)
		}
		return m, nil
	case <-c.exited:
		return message{}, fmt.Errorf("the %s process exited: %s", c.role, c.stderr.tail(2000))
	case <-time.After(2 * time.Minute):
		return message{}, fmt.Errorf("the %s process did not answer %s within 2 minutes", c.role, cmd)
	}
}

// usage asks the child for its own getrusage.
func (c *child) usage() (usage, error) {
	m, err := c.call("usage")
	if err != nil {
		return usage{}, err
	}
	if m.Usage == nil {
		return usage{}, fmt.Errorf("the %s process answered usage without it", c.role)
	}
	return *m.Usage, nil
}

// close ends the child: its stdin closes, and it is killed if it has not
// exited stopWait later. Its stdout is read to the end before it is
// reaped, so nothing it wrote is lost. Later calls return the first one's
// result.
func (c *child) close() error {
	c.closeOnce.Do(func() {
		_ = c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(c.stopWait):
			_ = c.cmd.Process.Kill()
			c.closeErr = fmt.Errorf("the %s process did not exit within %s of its stdin closing; killed", c.role, c.stopWait)
			<-c.exited
		}
		if err := c.cmd.Wait(); err != nil && c.closeErr == nil {
			c.closeErr = fmt.Errorf("the %s process: %w: %s", c.role, err, c.stderr.tail(2000))
		}
	})
	return c.closeErr
}

// kill sends the child SIGKILL, reads what it wrote before it died, reaps
// it, and returns its peak RSS (the kernel's, from wait4's rusage).
func (c *child) kill() (peakRSS int64, err error) {
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill the %s process: %w", c.role, err)
	}
	c.closeOnce.Do(func() {
		<-c.exited // its stdout ends with it
		_ = c.stdin.Close()
		_ = c.cmd.Wait() // "signal: killed", as asked
	})
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return maxRSSBytes(*ru), nil
	}
	return 0, nil
}

// profileChildren starts a CPU profile in each child, written to its path,
// and returns what stops them; when one cannot start, those started are
// stopped.
func profileChildren(paths map[*child]string) (stop func() error, err error) {
	var started []*child
	stop = func() error {
		var errs []error
		for _, c := range started {
			_, err := c.call("profile-stop")
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	for c, path := range paths {
		abs, err := filepath.Abs(path)
		if err == nil {
			_, err = c.call("profile " + abs)
		}
		if err != nil {
			return nil, errors.Join(err, stop())
		}
		started = append(started, c)
	}
	return stop, nil
}

// lockedBuffer is a bytes buffer safe for concurrent writes (exec copies
// a child's stderr from a goroutine).
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail is the last n bytes written.
func (l *lockedBuffer) tail(n int) string {
	s := l.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}

// childOut is a child's side of the protocol: it writes whole lines, one
// writer at a time.
type childOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *childOut) send(m message) {
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(message{Kind: m.Kind, Error: err.Error()})
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(b, '\n'))
}

// serve answers the commands on in until it ends: "usage" with this
// process's usage, anything else with handle (which returns the reply).
func (o *childOut) serve(in io.Reader, handle func(cmd string) message) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd := strings.TrimSpace(sc.Text())
		var m message
		switch cmd {
		case "":
			continue
		case "usage":
			u := selfUsage()
			m = message{Usage: &u}
		case "profile-stop":
			if err := stopProfile(); err != nil {
				m = message{Error: err.Error()}
			}
		default:
			if path, ok := strings.CutPrefix(cmd, "profile "); ok {
				if err := startProfile(path); err != nil {
					m = message{Error: err.Error()}
				}
				break
			}
			if handle == nil {
				m = message{Error: fmt.Sprintf("unknown command %q", cmd)}
			} else {
				m = handle(cmd)
			}
		}
		m.Kind = "reply"
		o.send(m)
	}
}

// runChild runs this process as a child of the bench.
func runChild(role string) int {
	out := &childOut{w: os.Stdout}
	var err error
	switch role {
	case "emulator":
		err = runEmulator(out)
	case "receiver":
		err = runReceiver(out)
	case "member":
		err = runMember(out)
	default:
		err = errors.New("unknown role " + role)
	}
	if err != nil {
		out.send(message{Kind: "ready", Error: err.Error()})
		fmt.Fprintln(os.Stderr, "bench "+role+":", err)
		return 1
	}
	return 0
}

// profile is the file of the CPU profile being written, if any.
var profile *os.File

// startProfile starts a CPU profile of this process written to path;
// stopProfile ends it.
func startProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	profile = f
	return nil
}

func stopProfile() error {
	if profile == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := profile.Close()
	profile = nil
	return err
}

// appendRowIDs appends the _ids of snapshot rows to a rows message's
// bytes, one varint each.
func appendRowIDs(dst []byte, ids ...int64) []byte {
	for _, id := range ids {
		dst = binary.AppendVarint(dst, id)
	}
	return dst
}

// rowIDs reads a rows message's _ids (appendRowIDs).
func rowIDs(b []byte) ([]int64, error) {
	ids := make([]int64, 0, len(b)/3)
	for len(b) > 0 {
		id, n := binary.Varint(b)
		if n <= 0 {
			return ids, fmt.Errorf("a malformed row id after %d ids", len(ids))
		}
		ids = append(ids, id)
		b = b[n:]
	}
	return ids, nil
}
