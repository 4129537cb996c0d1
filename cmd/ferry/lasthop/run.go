package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// runOnce runs run k: a fresh emulator, three instances, n TTL deletes, the
// fault, then waits until every delete was delivered and counts. It
// returns the result even when the run did not complete (the count then
// says what was missing) with the error.
func runOnce(ctx context.Context, o *settings, node *nodeRuntime, k int, out io.Writer) (r *result, err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	e, err := newRunEnv(ctx, o, node, k)
	if err != nil {
		return nil, err
	}
	defer func() {
		e.close()
		if err == nil && r.ok(o) && !o.keep {
			e.removeDir()
			return
		}
		fmt.Fprintf(out, "run %d: configuration and process logs in %s\n", k, e.dir)
	}()
	truth, err := e.watchDeletes(ctx)
	if err != nil {
		return nil, err
	}
	defer truth.close()
	if e.live, err = e.startInstances(ctx, 1); err != nil {
		return nil, err
	}
	if err := e.waitStarted(ctx); err != nil {
		return nil, fmt.Errorf("the sidecars did not start: %w", err)
	}
	if err := e.writeDocs(ctx); err != nil {
		return nil, err
	}
	rep, err := e.fault(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "run %d fault: %s\n", k, rep.desc)
	waitErr := e.waitDone(ctx, truth)
	// Count with a context of its own: the run's may have ended.
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	r, err = e.tally(cctx, truth, rep)
	if err != nil {
		return nil, err
	}
	r.wall = time.Since(start)
	if waitErr != nil {
		return r, fmt.Errorf("the run did not complete: %w", waitErr)
	}
	return r, nil
}

// waitDone waits until every document expired, the ground truth saw every
// delete, Ferry recorded each as delivered (ledger) or dead-lettered, the
// replaced processes exited and no receiver has an effect in flight: then
// nothing more can be delivered.
func (e *runEnv) waitDone(ctx context.Context, t *truth) error {
	state := e.client.Database(stateDB)
	byStream := bson.D{{Key: "stream", Value: streamName}}
	return pollUntil(ctx, 100*time.Millisecond, func() error {
		left, err := e.source.CountDocuments(ctx, bson.D{})
		if err != nil {
			return err
		}
		if left > 0 {
			return fmt.Errorf("%d documents not expired yet", left)
		}
		deletes, err := t.count()
		if err != nil {
			return err
		}
		if deletes < e.opt.n {
			return fmt.Errorf("the ground truth saw %d of %d deletes", deletes, e.opt.n)
		}
		led, err := state.Collection("ledger").CountDocuments(ctx, byStream)
		if err != nil {
			return err
		}
		dlq, err := state.Collection("dlq").CountDocuments(ctx, byStream)
		if err != nil {
			return err
		}
		if int(led+dlq) < deletes {
			return fmt.Errorf("ferry recorded %d of %d deletes as delivered and dead-lettered %d", led, deletes, dlq)
		}
		for _, p := range e.retired {
			if !p.exited() {
				return fmt.Errorf("%s is still draining", p.name)
			}
		}
		for _, in := range e.live {
			if n := in.rcv.inFlight(); n > 0 {
				return fmt.Errorf("%d effects in flight on %s", n, in.rcv.instance)
			}
		}
		return nil
	})
}

// result is one run's count.
type result struct {
	run        int
	fault      string
	dedupe     string
	effects    int // effect documents of the stream
	deletes    int // deletes the ground truth saw
	duplicates int // effects beyond one per event id
	lost       int // deletes without an effect
	unknown    int // effects of ids the ground truth never saw
	keys       int // distinct documents with an effect
	otherCause int // effects not classified as TTL expiries
	dlq        int // events ferry dead-lettered
	duplicate  int // deliveries the receivers answered as duplicates
	inProgress int // deliveries answered "in progress"
	closing    int // deliveries answered "closing" (503 while draining)
	rep        *faultReport
	wall       time.Duration
}

// landed reports whether the fault hit effects in flight.
func (r *result) landed() bool { return r.rep != nil && r.rep.inflight > 0 }

// ok reports whether the run showed what its mode promises.
func (r *result) ok(o *settings) bool {
	if r == nil || !r.landed() || r.lost+r.unknown+r.otherCause > 0 {
		return false
	}
	if o.dedupe == dedupeLibrary {
		return r.duplicates == 0
	}
	return true // memory mode: judged over all runs
}

func (r *result) line() string {
	landed := "no"
	if r.landed() {
		landed = "yes"
	}
	s := fmt.Sprintf("run %d fault=%s effects=%d deletes=%d duplicates=%d lost=%d absorbed=%d landed=%s inflight_at_fault=%d duplicate_answers=%d in_progress_answers=%d closing_answers=%d dedupe=%s wall=%.1fs",
		r.run, r.fault, r.effects, r.deletes, r.duplicates, r.lost, r.duplicate+r.inProgress, landed, r.rep.inflight,
		r.duplicate, r.inProgress, r.closing, r.dedupe, r.wall.Seconds())
	if r.unknown > 0 {
		s += fmt.Sprintf(" unknown_ids=%d", r.unknown)
	}
	if r.otherCause > 0 {
		s += fmt.Sprintf(" not_ttl=%d", r.otherCause)
	}
	if r.dlq > 0 {
		s += fmt.Sprintf(" dead_lettered=%d", r.dlq)
	}
	if r.rep != nil && r.rep.handoff > 0 {
		s += fmt.Sprintf(" handoff_ms=%d", r.rep.handoff.Milliseconds())
	}
	if r.keys != r.effects-r.duplicates {
		s += fmt.Sprintf(" distinct_documents=%d", r.keys)
	}
	return s
}

// tally counts the effects against the ground truth and the receivers'
// answers.
func (e *runEnv) tally(ctx context.Context, t *truth, rep *faultReport) (*result, error) {
	r := &result{run: e.run, fault: e.opt.fault, dedupe: e.opt.dedupe, rep: rep}
	truth := t.snapshot()
	r.deletes = len(truth)
	cur, err := e.client.Database(effectsDB).Collection(effectsColl).Find(ctx, bson.D{{Key: "stream", Value: streamName}})
	if err != nil {
		return nil, err
	}
	var docs []struct {
		ID    string `bson:"id"`
		Cause string `bson:"cause"`
		Key   struct {
			ID string `bson:"_id"`
		} `bson:"key"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	ids, keys := map[string]bool{}, map[string]bool{}
	for _, d := range docs {
		r.effects++
		ids[d.ID] = true
		keys[d.Key.ID] = true
		if _, ok := truth[d.ID]; !ok {
			r.unknown++
		}
		if d.Cause != "ttl" {
			r.otherCause++
		}
	}
	r.duplicates = r.effects - len(ids)
	r.keys = len(keys)
	for id := range truth {
		if !ids[id] {
			r.lost++
		}
	}
	dlq, err := e.client.Database(stateDB).Collection("dlq").CountDocuments(ctx, bson.D{{Key: "stream", Value: streamName}})
	if err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	r.dlq = int(dlq)
	for _, rc := range e.receivers {
		r.duplicate += rc.outcome("duplicate")
		r.inProgress += rc.outcome("in-progress")
		r.closing += rc.outcome("closing")
	}
	return r, nil
}
