package emutest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// startTimeout bounds how long an emulator may take to print its
// connection string, and each control command.
const startTimeout = 30 * time.Second

// controlAppName is the application name of the client that sends the
// controls: a fail point limited to another application name never hits
// it.
const controlAppName = "emutest-control"

// Server is an emulator running as a child process for one test. Its
// methods fail the test (t.Fatal) when the emulator does not do what they
// ask, so they must be called from the test's goroutine, as t.Fatal
// requires.
type Server struct {
	tb  testing.TB
	uri string
	cmd *exec.Cmd

	stdin  *os.File // the emulator exits when it is closed
	stdout *os.File
	stderr *tailBuffer

	mu      sync.Mutex
	control *mongo.Client // connected on first use
	closed  bool
}

// start runs the emulator binary with opts and waits for its connection
// string.
func start(tb testing.TB, opts []Option) (*Server, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	args := []string{"-addr=127.0.0.1:0", "-test-controls", "-exit-on-stdin-eof"}
	for _, o := range opts {
		args = append(args, o.args()...)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("emutest: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("emutest: %w", err)
	}
	s := &Server{tb: tb, stdin: inW, stdout: outR, stderr: &tailBuffer{max: 64 << 10}}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = inR, outW, s.stderr
	err = s.cmd.Start()
	inR.Close() // the child's now, or nobody's
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("emutest: start %s: %w", bin, err)
	}
	_ = outR.SetReadDeadline(time.Now().Add(startTimeout))
	line, err := bufio.NewReader(outR).ReadString('\n')
	s.uri = strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(s.uri, "mongodb://") {
		exit := s.stop()
		return nil, fmt.Errorf("emutest: the emulator (%s %s) printed no connection string (%q, %v; %v); its stderr:\n%s",
			bin, strings.Join(args, " "), line, err, exit, s.stderr)
	}
	return s, nil
}

// URI returns the emulator's connection string,
// mongodb://127.0.0.1:PORT/?replicaSet=rs0.
func (s *Server) URI() string { return s.uri }

// Close kills the emulator and reaps it; the test fails if the emulator
// had exited by itself before (it crashed), with what it printed on
// stderr. New registers it as a cleanup; calling it again does nothing.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	control := s.control
	s.mu.Unlock()
	if control != nil {
		_ = control.Disconnect(context.Background())
	}
	if err := s.stop(); err != nil {
		s.tb.Errorf("emutest: %v; its stderr:\n%s", err, s.stderr)
	}
}

// stop kills the emulator, reaps it and reports it if it had exited by
// itself.
func (s *Server) stop() error {
	_ = s.cmd.Process.Kill() // a no-op on one that exited (not yet reaped)
	werr := s.cmd.Wait()
	s.stdin.Close()
	s.stdout.Close()
	if st := s.cmd.ProcessState; st != nil && st.Exited() {
		return fmt.Errorf("the emulator exited by itself before the test ended (%v)", werr)
	}
	return nil
}

// client is the connection the controls go through.
func (s *Server) client() *mongo.Client {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.tb.Fatal("emutest: a control of an emulator already closed")
	}
	if s.control == nil {
		c, err := mongo.Connect(options.Client().ApplyURI(s.uri).SetAppName(controlAppName))
		if err != nil {
			s.tb.Fatalf("emutest: connect to the emulator: %v", err)
		}
		s.control = c
	}
	return s.control
}

// run sends one command to the admin database and decodes its reply into
// out (unless nil), failing the test if the command fails.
func (s *Server) run(cmd bson.D, out any) {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	res := s.client().Database("admin").RunCommand(ctx, cmd)
	var err error
	if out != nil {
		err = res.Decode(out)
	} else {
		err = res.Err()
	}
	if err != nil {
		s.tb.Fatalf("emutest: %s: %v", cmd[0].Key, err)
	}
}

// tailBuffer keeps the last max bytes written to it; the exec package
// writes the emulator's stderr into it from a goroutine of its own.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if extra := b.buf.Len() - b.max; extra > 0 {
		b.buf.Next(extra)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() == 0 {
		return "(nothing)"
	}
	return b.buf.String()
}
