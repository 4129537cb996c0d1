package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-io/ferry"
)

// childEnv marks a process the campaign started as `ferry run` or `ferry
// verify`: the chaos binary re-executed with that command line runs the
// ferry command (package cli); under go test the binary is the test
// binary, whose TestMain does the same when the mark is set.
const childEnv = "FERRY_CHAOS_CHILD"

// member is one `ferry run -c <config>` process. Each process has an id
// of its own (a restarted member is a new process with a new id: ids must
// differ per process, or fencing breaks).
type member struct {
	slot    int
	id      string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // the exit status, once done is closed
	killed  bool  // by the campaign, with SIGKILL
	stopped bool  // SIGSTOPped, not yet continued
}

// startMember starts the process of slot with id.
func (e *env) startMember(slot int, id string) (*member, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	m := &member{slot: slot, id: id, logPath: filepath.Join(e.dir, id+".log"), done: make(chan struct{})}
	logf, err := os.Create(m.logPath)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(self, "run", "-c", e.config)
	m.cmd.Env = childEnviron("FERRY_MEMBER_ID="+id, "FERRY_CHAOS_SECRET="+e.secret)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	// A process group of its own: a Ctrl-C at the terminal interrupts the
	// campaign, which then kills its members, rather than draining them
	// behind its back.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		m.err = m.cmd.Wait()
		logf.Close()
		close(m.done)
	}()
	return m, nil
}

// childEnviron is the campaign's environment for a child process, with
// the ops port left to the configuration (no PORT) and extra added.
func childEnviron(extra ...string) []string {
	env := []string{childEnv + "=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PORT=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func (m *member) signal(sig syscall.Signal) { _ = m.cmd.Process.Signal(sig) }

func (m *member) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// ready reports whether the process is up: it logged that it listens
// (its signal handlers are installed by then: SIGTERM drains).
func (m *member) ready() bool {
	b, err := os.ReadFile(m.logPath)
	return err == nil && strings.Contains(string(b), `"msg":"listening"`)
}

// kill sends SIGKILL and waits for the process to be gone.
func (m *member) kill() {
	m.killed = true
	if m.stopped {
		m.stopped = false
	}
	m.signal(syscall.SIGKILL)
	<-m.done
}

// terminate sends SIGTERM (continuing a stopped process first) and waits
// up to d for the exit; a member still running then gets SIGQUIT (its
// goroutines go to its log) and SIGKILL, and terminate reports it.
func (m *member) terminate(d time.Duration) error {
	if m.exited() {
		return nil
	}
	if m.stopped {
		m.signal(syscall.SIGCONT)
		m.stopped = false
	}
	m.signal(syscall.SIGTERM)
	select {
	case <-m.done:
		return nil
	case <-time.After(d):
	}
	m.signal(syscall.SIGQUIT)
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		m.signal(syscall.SIGKILL)
		<-m.done
	}
	return fmt.Errorf("member %s did not exit within %v of SIGTERM (its goroutines are in %s)", m.id, d, m.logPath)
}

// logLine is one line of a member's JSON log, the fields the campaign
// reads.
type logLine struct {
	Time      time.Time `json:"time"`
	Level     string    `json:"level"`
	Msg       string    `json:"msg"`
	Partition *int      `json:"partition"`
	Err       string    `json:"err"`
	Class     string    `json:"class"`
	Reason    string    `json:"reason"`
}

// A historyFailure is a member's stream failing with history-lost: the
// partition whose history it gave up on, when, and the library's reason.
type historyFailure struct {
	Member    string
	Partition int
	At        time.Time
	Err       string
}

// memberLog is what the campaign takes from a member's log.
type memberLog struct {
	restarts  []time.Time // a partition lost or stopped and restarted, a membership lost
	backfills int         // backfills started
	// lastBackfill is when the last one started.
	lastBackfill time.Time
	failed       []string // "stream failed" lines (but historyLost's)
	// historyLost are the stream's history-lost failures, by partition:
	// the library gave up recovering that partition's history (two
	// backfills in a row whose start marker left the oplog first).
	historyLost []historyFailure
	errors      int // ERROR lines
	lines       []logLine
	other       []string // lines that are not JSON (a panic, SIGQUIT's goroutines)
}

// readLog parses a member's log file.
func readLog(path string) (memberLog, error) {
	var ml memberLog
	f, err := os.Open(path)
	if err != nil {
		return ml, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Time.IsZero() {
			if len(ml.other) < 200 {
				ml.other = append(ml.other, sc.Text())
			}
			continue
		}
		ml.lines = append(ml.lines, l)
		switch {
		case l.Msg == "partition lost", strings.HasPrefix(l.Msg, "partition stopped"), strings.HasPrefix(l.Msg, "membership lost"):
			// A lost membership gives up every partition the member held.
			ml.restarts = append(ml.restarts, l.Time)
		case l.Msg == "snapshot started":
			ml.backfills++
			ml.lastBackfill = l.Time
		case l.Msg == "snapshot resumed":
			// A takeover's member goes on with a snapshot another started.
			ml.lastBackfill = l.Time
		case strings.HasPrefix(l.Msg, "stream failed") && l.Class == string(ferry.FailHistoryLost):
			// The group's line names the partition; the daemon's advice
			// line ("stream failed: what to do") repeats the failure.
			if l.Partition != nil {
				ml.historyLost = append(ml.historyLost, historyFailure{Partition: *l.Partition, At: l.Time, Err: l.Err})
			}
		case strings.HasPrefix(l.Msg, "stream failed"):
			ml.failed = append(ml.failed, sc.Text())
		}
		if l.Level == "ERROR" {
			ml.errors++
		}
	}
	return ml, sc.Err()
}

// tailFile returns the last n bytes of a file.
func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}
