package main

import (
	"context"
	"fmt"
	"sort"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// faultReport says what a fault did and whether it hit deliveries in
// flight: runs that miss the fault window prove nothing.
type faultReport struct {
	desc      string
	inflight  int // effects started, not answered, on what the fault hit, when it hit
	atEffects int // effects done when it hit
	// handoff is, for scale-in, the time from the SIGTERM until every
	// partition of the instance had another live owner.
	handoff time.Duration
}

// fault runs the run's fault once its window opens.
func (e *runEnv) fault(ctx context.Context) (*faultReport, error) {
	switch e.opt.fault {
	case faultKill:
		return e.killSidecar(ctx)
	case faultRedeploy:
		return e.redeploy(ctx)
	case faultScaleIn:
		return e.scaleIn(ctx)
	default:
		return e.receiverDown(ctx)
	}
}

// effects returns how many effects the receivers recorded.
func (e *runEnv) effects(ctx context.Context) (int, error) {
	n, err := e.client.Database(effectsDB).Collection(effectsColl).CountDocuments(ctx, bson.D{})
	return int(n), err
}

// waitWindow waits until at least minEffects effects are done and pick
// finds what to hit (with effects in flight), and returns the effect
// count then.
func (e *runEnv) waitWindow(ctx context.Context, minEffects int, pick func() error) (int, error) {
	var done int
	err := pollUntil(ctx, 20*time.Millisecond, func() error {
		n, err := e.effects(ctx)
		if err != nil {
			return err
		}
		if done = n; n < minEffects {
			return fmt.Errorf("the fault window did not open: %d of the %d effects wanted done first", n, minEffects)
		}
		return pick()
	})
	return done, err
}

// pickOwner returns the live instance owning the most partitions among
// those whose receiver has effects in flight, and its partitions.
func (e *runEnv) pickOwner(ctx context.Context) (*instance, []int, error) {
	per := map[*instance][]int{}
	for p, in := range e.owners(ctx) {
		per[in] = append(per[in], p)
	}
	var best *instance
	for in, ps := range per {
		if in.rcv.inFlight() > 0 && (best == nil || len(ps) > len(per[best])) {
			best = in
		}
	}
	if best == nil {
		return nil, nil, fmt.Errorf("the fault window did not open: no partition owner's receiver has an effect in flight")
	}
	sort.Ints(per[best])
	return best, per[best], nil
}

// waitVictim waits until a quarter of the effects are done and an
// instance owning partitions has effects in flight (pickOwner), and returns
// it, its partitions and the effects done then.
func (e *runEnv) waitVictim(ctx context.Context) (victim *instance, parts []int, at int, err error) {
	at, err = e.waitWindow(ctx, e.opt.n/4, func() (err error) {
		victim, parts, err = e.pickOwner(ctx)
		return err
	})
	return victim, parts, at, err
}

// killSidecar SIGKILLs the sidecar of the instance owning the most
// partitions, once a quarter of the effects are done and its receiver is
// applying some. Its partitions move to the others after lease_ttl, which
// replay what it delivered but had not recorded, to other instances'
// receivers.
func (e *runEnv) killSidecar(ctx context.Context) (*faultReport, error) {
	victim, parts, at, err := e.waitVictim(ctx)
	if err != nil {
		return nil, err
	}
	inflight := victim.rcv.inFlight()
	victim.car.signal(syscall.SIGKILL)
	<-victim.car.done
	return &faultReport{
		desc:      fmt.Sprintf("SIGKILL %s (partitions %v) with %d effects in flight on %s, %d of %d effects done", victim.member, parts, inflight, victim.rcv.instance, at, e.opt.n),
		inflight:  inflight,
		atEffects: at,
	}, nil
}

// redeploy SIGTERMs every sidecar and receiver once a third of the effects
// are done and effects are in flight, and starts new instances at once (new
// processes, new member ids, new ports), as a Cloud Run redeploy replaces
// every instance; the old ones drain meanwhile.
func (e *runEnv) redeploy(ctx context.Context) (*faultReport, error) {
	var inflight int
	at, err := e.waitWindow(ctx, e.opt.n/3, func() error {
		inflight = 0
		for _, in := range e.live {
			inflight += in.rcv.inFlight()
		}
		if inflight == 0 {
			return fmt.Errorf("the fault window did not open: no receiver has an effect in flight")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	old := e.live
	for _, in := range old {
		in.car.signal(syscall.SIGTERM)
		in.rcv.signal(syscall.SIGTERM)
		e.retired = append(e.retired, in.car, in.rcv.proc)
	}
	e.live = nil
	t0 := time.Now()
	ins, err := e.startInstances(ctx, old[0].gen+1)
	if err != nil {
		return nil, fmt.Errorf("redeploy: %w", err)
	}
	e.live = ins
	return &faultReport{
		desc: fmt.Sprintf("SIGTERM every sidecar and receiver with %d effects in flight, %d of %d effects done; %d new instances listening %d ms later",
			inflight, at, e.opt.n, len(ins), time.Since(t0).Milliseconds()),
		inflight:  inflight,
		atEffects: at,
	}, nil
}

// receiverDown SIGKILLs the receiver of the instance owning the most
// partitions, once a quarter of the effects are done and it is applying
// some, and restarts it on the same port after -down. Its transactions in
// flight stay open on the server until transactionLifetimeLimitSeconds (60
// s), during which the restarted receiver answers their replays "in
// progress".
func (e *runEnv) receiverDown(ctx context.Context) (*faultReport, error) {
	victim, parts, at, err := e.waitVictim(ctx)
	if err != nil {
		return nil, err
	}
	old := victim.rcv
	inflight := old.inFlight()
	old.signal(syscall.SIGKILL)
	<-old.done
	select {
	case <-time.After(e.opt.down): // the fault's length, not synchronisation
	case <-ctx.Done():
		return nil, fmt.Errorf("receiver-down: %w while %s was down", ctx.Err(), old.instance)
	}
	r, err := e.startReceiver(old.instance, old.port)
	if err != nil {
		return nil, err
	}
	victim.rcv = r
	if err := r.waitListening(ctx); err != nil {
		return nil, fmt.Errorf("receiver-down: restarting %s: %w", old.instance, err)
	}
	return &faultReport{
		desc: fmt.Sprintf("SIGKILL receiver %s (its sidecar %s owns partitions %v) with %d effects in flight, %d of %d effects done; restarted on port %d after %s",
			old.instance, victim.member, parts, inflight, at, e.opt.n, old.port, e.opt.down),
		inflight:  inflight,
		atEffects: at,
	}, nil
}

// scaleIn SIGTERMs the sidecar and the receiver of the instance owning the
// most partitions, once a quarter of the effects are done and its receiver
// is applying some, as Cloud Run does to an instance it scales in, and
// times the hand-off: from the signal until another live instance owns
// each of its partitions. The instance is not replaced.
func (e *runEnv) scaleIn(ctx context.Context) (*faultReport, error) {
	victim, parts, at, err := e.waitVictim(ctx)
	if err != nil {
		return nil, err
	}
	inflight := victim.rcv.inFlight()
	t0 := time.Now()
	victim.car.signal(syscall.SIGTERM)
	victim.rcv.signal(syscall.SIGTERM)
	e.retired = append(e.retired, victim.car, victim.rcv.proc)
	var rest []*instance
	for _, in := range e.live {
		if in != victim {
			rest = append(rest, in)
		}
	}
	e.live = rest
	err = pollUntil(ctx, 5*time.Millisecond, func() error {
		own := e.owners(ctx)
		for _, p := range parts {
			if own[p] == nil {
				return fmt.Errorf("scale-in: partition %d has no live owner yet", p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	handoff := time.Since(t0)
	return &faultReport{
		desc: fmt.Sprintf("SIGTERM %s and its receiver %s (partitions %v) with %d effects in flight, %d of %d effects done; handoff_ms=%d",
			victim.member, victim.rcv.instance, parts, inflight, at, e.opt.n, handoff.Milliseconds()),
		inflight:  inflight,
		atEffects: at,
		handoff:   handoff,
	}, nil
}
