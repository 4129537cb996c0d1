package mongotest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Server is an in-process MongoDB replica-set primary listening on a TCP
// port. Create one with NewServer or Start; Close stops it.
type Server struct {
	cfg config
	ln  net.Listener
	// secLns are the listeners of the secondaries (Secondaries option).
	secLns []net.Listener
	uri    string
	eng    *engine
	log    *slog.Logger

	mu     sync.Mutex
	conns  map[*conn]struct{}
	nextID int32
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts a server listening on the configured address (a random
// loopback port by default).
func Start(opts ...Option) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	return start(cfg, nil)
}

// start starts a server with a validated configuration; init, when not
// nil, sets up its engine before it accepts connections (a shard's or a
// mongos').
func start(cfg config, init func(*Server)) (*Server, error) {
	if cfg.replSetName == "" {
		return nil, fmt.Errorf("mongotest: ReplicaSetName must not be empty")
	}
	if cfg.oplogMaxEntries < 1 {
		return nil, fmt.Errorf("mongotest: OplogMaxEntries must be at least 1, got %d", cfg.oplogMaxEntries)
	}
	if cfg.standalone && cfg.secondaries > 0 {
		return nil, fmt.Errorf("mongotest: Standalone: a standalone server has no Secondaries")
	}
	if cfg.secondaries < 0 {
		return nil, fmt.Errorf("mongotest: Secondaries must not be negative, got %d", cfg.secondaries)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("mongotest: listen on %s: %w", cfg.addr, err)
	}
	secLns, err := listenSecondaries(ln, cfg.secondaries)
	if err != nil {
		ln.Close()
		return nil, err
	}
	log := cfg.logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:    cfg,
		ln:     ln,
		secLns: secLns,
		log:    log,
		conns:  make(map[*conn]struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
	s.uri = fmt.Sprintf("mongodb://%s/?replicaSet=%s", ln.Addr().String(), cfg.replSetName)
	if cfg.standalone {
		s.uri = fmt.Sprintf("mongodb://%s/", ln.Addr().String())
	}
	s.eng = newEngine(&s.cfg)
	if init != nil {
		init(s)
	}
	s.wg.Add(2 + len(secLns))
	go s.acceptLoop(ln, 0)
	for i, l := range secLns {
		go s.acceptLoop(l, i+1)
	}
	go s.backgroundLoop()
	return s, nil
}

// NewServer starts a server like Start and panics if it cannot listen, the
// way httptest.NewServer does.
func NewServer(opts ...Option) *Server {
	s, err := Start(opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// URI returns the connection string, mongodb://127.0.0.1:PORT/?replicaSet=rs0.
func (s *Server) URI() string { return s.uri }

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting connections, closes every open connection and waits
// for the server's goroutines to finish. It is safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.ln.Close()
	for _, l := range s.secLns {
		l.Close()
	}
	s.eng.close()
	s.wg.Wait()
}

// CloseClientConnections closes every open client connection, as a network
// failure would. The server keeps accepting new ones.
func (s *Server) CloseClientConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.nc.Close()
	}
}

// AdvanceClock moves the server's clock forward by d (TTL expiry, $$NOW,
// wallTime and cluster times follow it). Tests use it to move time without
// sleeping.
func (s *Server) AdvanceClock(d time.Duration) { s.eng.advanceClock(d) }

// Now returns the server's current wall-clock time.
func (s *Server) Now() time.Time { return s.eng.now() }

// connCount is how many connections are open. The accept loop changes
// the set under s.mu: read it under s.mu too (serverStatus, which holds the
// engine's lock; s.mu is never held while the engine's is taken).
func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// acceptLoop serves the connections of one member: 0 is the primary,
// i the i-th secondary.
func (s *Server) acceptLoop(ln net.Listener, member int) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.nextID++
		c := &conn{srv: s, nc: nc, id: s.nextID, member: member}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// backgroundLoop runs the periodic no-op writer and the TTL monitor. Both
// intervals may change at run time (setParameter), so the wait is recomputed
// after every wake-up.
func (s *Server) backgroundLoop() {
	defer s.wg.Done()
	lastNoop := time.Now()
	lastTTL := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := time.Second // at least every second: abort expired transactions
		if iv := s.eng.noopInterval(); iv > 0 {
			wait = min(wait, time.Until(lastNoop.Add(iv)))
		}
		if iv := s.eng.ttlInterval(); iv > 0 {
			wait = min(wait, time.Until(lastTTL.Add(iv)))
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-s.ctx.Done():
			return
		case <-s.eng.ttlKick:
			s.eng.runTTL()
			lastTTL = time.Now()
		case <-timer.C:
			s.eng.reapTxns()
			if iv := s.eng.noopInterval(); iv > 0 && time.Since(lastNoop) >= iv {
				s.eng.writeNoopIfIdle(iv)
				lastNoop = time.Now()
			}
			if iv := s.eng.ttlInterval(); iv > 0 && time.Since(lastTTL) >= iv {
				s.eng.runTTL()
				lastTTL = time.Now()
			}
		}
	}
}
