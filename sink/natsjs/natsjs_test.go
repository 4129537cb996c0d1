package natsjs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/natssubject"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/natsjs"
	"github.com/ferry-io/ferry/sink/sinktest"
)

func TestNewValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		url  string
		opts []natsjs.Option
		want string
	}{
		{"empty url", "", nil, "empty server URL"},
		{"zero timeout", "nats://x", []natsjs.Option{natsjs.Timeout(0)}, "must be positive"},
		{"empty subject", "nats://x", []natsjs.Option{natsjs.Subject("")}, "empty template"},
		{"unknown placeholder", "nats://x", []natsjs.Option{natsjs.Subject("ferry.{database}")}, "unknown placeholder {database}"},
		{"unclosed", "nats://x", []natsjs.Option{natsjs.Subject("ferry.{db")}, "unclosed '{'"},
		{"unmatched", "nats://x", []natsjs.Option{natsjs.Subject("ferry.db}")}, "unmatched '}'"},
		{"wildcard", "nats://x", []natsjs.Option{natsjs.Subject("ferry.*.{db}")}, "wildcard"},
		{"full wildcard", "nats://x", []natsjs.Option{natsjs.Subject("ferry.{db}.>")}, "wildcard"},
		{"space", "nats://x", []natsjs.Option{natsjs.Subject("ferry {db}")}, "whitespace"},
		{"empty token", "nats://x", []natsjs.Option{natsjs.Subject("ferry..{db}")}, "empty token"},
		{"trailing dot", "nats://x", []natsjs.Option{natsjs.Subject("ferry.{db}.")}, "empty token"},
		{"nil option", "nats://x", []natsjs.Option{nil}, "nil option"},
		{"nil nats option", "nats://x", []natsjs.Option{natsjs.NATSOptions(nil)}, "NATSOptions: option 0 is nil"},
		// Validated once, every problem named, no credential shown; a
		// later option overrides an earlier one.
		{"every problem", "nats://u:s3cret x@h", []natsjs.Option{natsjs.Timeout(0), natsjs.Timeout(time.Second), natsjs.Subject("a.>")},
			"natsjs: invalid option: url: the server URL does not parse as a URL (percent-encode reserved characters such as '@', ':', '/' in the user name and password); " +
				"Subject: wildcard '>': a publish subject must be literal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := natsjs.New(c.url, c.opts...)
			if !errors.Is(err, natsjs.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New = %v, want ErrInvalidOption containing %q", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("New = %v: the error shows the URL's password", err)
			}
		})
	}
	if _, err := natsjs.New("nats://x", natsjs.Subject("cdc.{db}-{coll}.{op}.v1"), natsjs.Canonical(), natsjs.Timeout(time.Second)); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

// eventIn returns a sinktest event moved to another namespace and op.
func eventIn(seq int, db, coll, op string) *ferry.Event {
	ev := sinktest.NewEvent(seq, "k", 1)
	ev.Namespace = ferry.Namespace{DB: db, Coll: coll}
	ev.OperationType = op
	return ev
}

func TestSubjects(t *testing.T) {
	b := startBroker(t)
	ctx := context.Background()
	cases := []struct {
		tmpl string
		ev   *ferry.Event
		want string
	}{
		{"", eventIn(1, "shop", "orders", "update"), "ferry.shop.orders.update"},
		{"", eventIn(2, "my.db", "a b*c>d", "insert"), "ferry.my_db.a_b_c_d.insert"},
		{"", eventIn(3, "shop", "", "dropDatabase"), "ferry.shop._.dropDatabase"},
		{"", eventIn(4, "caf\u00e9", "t\tab", "delete"), "ferry.caf\u00e9.t_ab.delete"},
		{"ferry.cdc.{op}.{db}-{coll}", eventIn(5, "shop", "orders", "insert"), "ferry.cdc.insert.shop-orders"},
	}
	for _, c := range cases {
		var opts []natsjs.Option
		if c.tmpl != "" {
			opts = append(opts, natsjs.Subject(c.tmpl))
		}
		s, err := natsjs.New(b.url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, []*ferry.Event{c.ev}); err != nil {
			t.Fatalf("%s: Write: %v", c.want, err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		m, err := b.stream.GetLastMsgForSubject(ctx, c.want)
		if err != nil {
			t.Errorf("no message on %q: %v", c.want, err)
			continue
		}
		if got := m.Header.Get(jetstream.MsgIDHeader); got != c.ev.ID() {
			t.Errorf("%q: Nats-Msg-Id %q, want %q", c.want, got, c.ev.ID())
		}
	}
}

func TestCanonical(t *testing.T) {
	b := startBroker(t)
	ctx := context.Background()
	for _, canonical := range []bool{false, true} {
		var opts []natsjs.Option
		if canonical {
			opts = append(opts, natsjs.Canonical(), natsjs.Subject("ferry.canonical.{op}"))
		}
		s, err := natsjs.New(b.url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		ev := sinktest.NewEvent(10, "k", 1)
		if canonical {
			ev = sinktest.NewEvent(11, "k", 1)
		}
		if err := s.Write(ctx, []*ferry.Event{ev}); err != nil {
			t.Fatal(err)
		}
		_ = s.Close(ctx)
		subj := "ferry.shop.orders.update"
		if canonical {
			subj = "ferry.canonical.update"
		}
		m, err := b.stream.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			t.Fatal(err)
		}
		if has := bytes.Contains(m.Data, []byte(`"$numberInt"`)); has != canonical {
			t.Errorf("canonical=%v: body %s", canonical, m.Data)
		}
	}
}

func TestNoStreamIsPermanent(t *testing.T) {
	b := startBroker(t)
	ctx := context.Background()
	s, err := natsjs.New(b.url, natsjs.Subject("unbound.{db}.{coll}"), natsjs.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	evs := []*ferry.Event{sinktest.NewEvent(1, "a", 1)}
	errs := sink.Errors(s.Write(ctx, evs), 1)
	if errs[0] == nil || sink.IsRetryable(errs[0]) || !strings.Contains(errs[0].Error(), "no stream is bound") {
		t.Errorf("publish to a subject no stream listens on: %v, want a permanent 'no stream is bound' error", errs[0])
	}
	if err := sink.Handler(s)(ctx, evs[0]); !errors.Is(err, ferry.ErrPermanent) {
		t.Errorf("Handler = %v, want ferry.Permanent", err)
	}
}

func TestServerDownIsRetryable(t *testing.T) {
	b := startBroker(t)
	ctx := context.Background()
	s, err := natsjs.New(b.url, natsjs.Timeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.Write(ctx, []*ferry.Event{sinktest.NewEvent(1, "a", 1)}); err != nil {
		t.Fatal(err)
	}
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
	evs := []*ferry.Event{sinktest.NewEvent(2, "a", 1), sinktest.NewEvent(3, "a", 1), sinktest.NewEvent(4, "b", 1)}
	errs := sink.Errors(s.Write(ctx, evs), len(evs))
	for i, e := range errs {
		if e == nil || !sink.IsRetryable(e) {
			t.Errorf("event %d with the server down: %v, want a retryable error", i, e)
		}
	}
	if !errors.Is(errs[1], sink.ErrSkipped) {
		t.Errorf("later event of the failed document: %v, want ErrSkipped", errs[1])
	}
}

// TestForcedReplay writes events, "crashes" after the broker acknowledged
// them but before the checkpoint, and replays them from the checkpoint
// with a new sink instance (twice); the stream must hold each event once.
func TestForcedReplay(t *testing.T) {
	b := startBroker(t)
	r := newReceiver(t, b)
	replay := sinktest.ForcedReplay(t, func() sink.Sink { return r.NewSink(t) })
	evs := replay.Events
	published := r.Received()
	stored := b.stored(t)
	distinct := map[string]bool{}
	for _, d := range published {
		distinct[d.EventID] = true
	}
	dropped := len(published) - len(stored)
	t.Logf("published %d, stored %d, distinct events %d, duplicates dropped by the stream %d",
		len(published), len(stored), len(distinct), dropped)
	fmt.Printf("natsjs forced replay: %d publishes of %d events; stream holds %d messages; %d duplicates dropped\n",
		len(published), len(evs), len(stored), dropped)
	if len(stored) != len(evs) || len(distinct) != len(evs) {
		t.Errorf("stream holds %d messages for %d distinct events (%d written)", len(stored), len(distinct), len(evs))
	}
	if want := sinktest.ReplayWrites; len(published) != want {
		t.Errorf("%d publishes reached the broker, want %d", len(published), want)
	}
	// The stream holds each document's events in change order.
	for i, m := range stored {
		if got := m.Header.Get(jetstream.MsgIDHeader); got != evs[i].ID() {
			t.Fatalf("stream message %d is event %s, want %s", i+1, got, evs[i].ID())
		}
	}
}

// BenchmarkWrite publishes batches of 100 events to the in-process server
// next to the no-op baseline (sinktest.Benchmark).
func BenchmarkWrite(b *testing.B) {
	br := startBroker(b)
	sinktest.Benchmark(b, "natsjs", "jetstream", func(b *testing.B, baseline bool) sink.Sink {
		var opts []natsjs.Option
		if baseline {
			opts = append(opts, natsjs.WithoutPublish())
		}
		s, err := natsjs.New(br.url, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

func TestDefaultSubjectIsShared(t *testing.T) {
	if natsjs.DefaultSubject != natssubject.Default {
		t.Errorf("DefaultSubject %q, natssubject.Default %q", natsjs.DefaultSubject, natssubject.Default)
	}
}

// closedPort returns a local address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestCredentialsNeverInErrors checks that user:password and token
// credentials in the server URL stay out of New's and Connect's errors,
// which name the server without them.
func TestCredentialsNeverInErrors(t *testing.T) {
	const password, token = "n4ts-pa55w0rd-771", "s3cr3t-n4ts-t0ken-42"
	addr := closedPort(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, url, where string
		secrets          []string
	}{
		{"user and password", "nats://ferry:" + password + "@" + addr, "nats://" + addr, []string{password}},
		{"token", "nats://" + token + "@" + addr, "nats://" + addr, []string{token}},
		{"percent-encoded", "tls://ferry:" + password + "%2F%40x@" + addr, "tls://" + addr, []string{password, "%2F%40x", "/@x"}},
		{"list without scheme", "nats://" + addr + ", ferry:" + password + "@" + addr, "nats://" + addr + ",nats://" + addr, []string{password}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := natsjs.New(c.url)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Connect(ctx)
			if err == nil {
				s.Close(ctx)
				t.Fatal("Connect to a closed port succeeded")
			}
			for _, secret := range c.secrets {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Connect error reveals %q: %v", secret, err)
				}
			}
			if !strings.Contains(err.Error(), "natsjs: connecting to "+c.where+": ") {
				t.Errorf("Connect error does not name the server %s: %v", c.where, err)
			}
		})
	}
	// A URL that does not parse is refused by New, without echoing it
	// (url.Parse's own error repeats the whole URL).
	for _, u := range []string{
		"nats://ferry:" + password + " x@" + addr,
		"nats://ferry:" + password + "%zz@" + addr,
		"nats://" + addr + ",nats://ferry:" + password + "/x@" + addr,
	} {
		_, err := natsjs.New(u)
		if err == nil || !strings.Contains(err.Error(), "does not parse as a URL") {
			t.Errorf("New(unparsable URL) = %v, want a parse error", err)
		} else if strings.Contains(err.Error(), password) {
			t.Errorf("New error reveals the password: %v", err)
		}
	}
}
