package cli

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/backoff"
)

// single supervises the one consumer of a stream with the bolt state store
// (no group), with the states and failure handling of a group member: a
// failure (ferry.AsFailure) is a state, re-checked with backoff from 1 s
// to 5 min when it can clear; any other stop restarts the consumer after a
// backoff from 1 s to 30 s.
type single struct {
	name     string
	c        *ferry.Consumer
	log      *slog.Logger
	onChange func(group.Status)

	mu sync.Mutex
	s  group.Status
}

func newSingle(name string, log *slog.Logger, onChange func(group.Status)) *single {
	return &single{name: name, log: log.With("stream", name), onChange: onChange, s: group.Status{State: group.Starting, Since: time.Now()}}
}

func (x *single) get() group.Status {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.s
	s.Partitions = maps.Clone(x.s.Partitions)
	s.SinkErrors = maps.Clone(x.s.SinkErrors)
	return s
}

func (x *single) update(f func(*group.Status)) {
	x.mu.Lock()
	before := x.s.State
	f(&x.s)
	changed := x.s.State != before
	if changed {
		x.s.Since = time.Now()
	}
	x.mu.Unlock()
	if changed && x.onChange != nil {
		x.onChange(x.get())
	}
}

// OnState implements ferry.HookState.
func (x *single) OnState(i ferry.StateInfo) {
	x.update(func(s *group.Status) {
		switch i.State {
		case ferry.StateStopped:
			s.Partitions, s.SinkErrors = nil, nil
			return
		case ferry.StateWaitingForSink:
			s.State = group.WaitingForSink
			s.SinkErrors = map[int]string{i.Partition: group.SinkProblem(i.Err)}
		default:
			s.State = group.Running
			s.SinkErrors = nil
		}
		s.Partitions = map[int]ferry.RunState{i.Partition: i.State}
	})
}

// probation is how long a re-checked consumer must run without failing
// again for its failure to end.
const probation = 10 * time.Second

func (x *single) run(ctx context.Context) error {
	defer x.update(func(s *group.Status) { s.State = group.Stopped })
	recheck := backoff.New(time.Second, maxRecheckSingle)
	restart := backoff.New(time.Second, 30*time.Second)
	for ctx.Err() == nil {
		x.update(func(s *group.Status) { s.State = group.Starting })
		runCtx, cancel := context.WithCancel(ctx)
		started := time.Now()
		recovered := make(chan struct{})
		go func() {
			// A re-check that runs long enough ends the failure.
			t := time.NewTimer(probation)
			defer t.Stop()
			select {
			case <-t.C:
				if prev := x.get(); prev.Failure != nil {
					x.update(func(s *group.Status) { s.Failure, s.FailedSince, s.RetryAt = nil, time.Time{}, time.Time{} })
					recheck.Reset()
					x.log.Info("stream recovered", "class", prev.Failure.Class)
				}
			case <-runCtx.Done():
			}
			close(recovered)
		}()
		err := x.c.Run(runCtx)
		cancel()
		<-recovered
		if ctx.Err() != nil {
			break
		}
		if f, ok := ferry.AsFailure(err); ok {
			if !x.failed(ctx, f, recheck) {
				break
			}
			continue
		}
		if time.Since(started) >= 30*time.Second {
			restart.Reset()
		}
		wait := restart.Next()
		x.log.Warn("consumer stopped; restarting it after a backoff", "backoff", wait.Round(time.Millisecond), "err", err)
		x.update(func(s *group.Status) { s.LastError = err.Error() })
		if !backoff.Sleep(ctx, wait) {
			break
		}
	}
	return nil
}

const maxRecheckSingle = 5 * time.Minute

// failed records the failure and waits for its re-check (true) or for ctx
// (false).
func (x *single) failed(ctx context.Context, f ferry.Failure, recheck *backoff.Backoff) bool {
	prev := x.get()
	now := time.Now()
	since := now
	if prev.Failure != nil && prev.Failure.Class == f.Class {
		since = prev.FailedSince
	}
	var wait time.Duration
	var retryAt time.Time
	if f.Clears {
		wait = recheck.Next()
		retryAt = now.Add(wait)
	}
	x.update(func(s *group.Status) {
		s.State, s.Failure, s.FailedSince, s.RetryAt, s.Partitions, s.SinkErrors = group.Failed, &f, since, retryAt, nil, nil
	})
	if prev.Failure == nil || prev.Failure.Class != f.Class || prev.Failure.Detail != f.Detail {
		x.log.Error("stream failed", "class", f.Class, "err", f.Detail)
	}
	if !f.Clears {
		<-ctx.Done()
		return false
	}
	return backoff.Sleep(ctx, wait)
}
