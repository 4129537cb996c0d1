package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one child process: a receiver or a sidecar. Its output goes to
// a log file in the run's directory; a receiver's stdout lines are also
// handed to a function as they come.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process exited and its output was read
	err     error         // its exit status, once done is closed
}

// startProc starts cmd, its stderr (and its stdout unless onLine is set)
// to name.log in dir; with onLine, each stdout line goes to the log and to
// onLine.
func startProc(name, dir string, cmd *exec.Cmd, onLine func(string)) (*proc, error) {
	p := &proc{name: name, cmd: cmd, logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	log := &syncWriter{w: logf}
	cmd.Stderr = log
	cmd.Stdout = log
	if onLine != nil {
		cmd.Stdout = &lineWriter{log: log, onLine: onLine}
	}
	// A process group of its own: a Ctrl-C at the terminal interrupts
	// lasthop, which then stops its children, rather than reaching them
	// behind its back.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		p.err = cmd.Wait() // returns once the output is copied
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// signal sends sig unless the process exited.
func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// exited reports whether the process exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to grace for the exit, then SIGKILLs.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

// syncWriter serialises writes (exec copies stdout and stderr from
// goroutines of their own).
type syncWriter struct {
	mu sync.Mutex
	w  *os.File
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// lineWriter hands each complete line to onLine and writes it to log,
// prefixed with the time it was read.
type lineWriter struct {
	log    *syncWriter
	onLine func(string)
	buf    []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := l.buf[:i]
		// Stamped: the receiver's own lines carry no time, the sidecars' do.
		_, _ = l.log.Write([]byte(time.Now().UTC().Format(time.RFC3339Nano) + " " + string(line) + "\n"))
		l.onLine(string(line))
		l.buf = l.buf[i+1:]
	}
	return len(b), nil
}
