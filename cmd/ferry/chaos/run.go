package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/verify"
)

// run is one run in progress.
type run struct {
	p     plan
	s     settings
	e     *env
	g     *group
	w     *writer
	watch *projWatch // the mongodb sink's effects
	res   *runResult
	// windowStart is where ferry verify's window starts: a whole second
	// the oplog holds (verify's -from has whole seconds), before the
	// first write.
	windowStart time.Time
}

// fail records a problem that fails the run (once).
func (r *run) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, p := range r.res.problems {
		if p == msg {
			return
		}
	}
	r.res.problems = append(r.res.problems, msg)
}

// note records what is worth knowing but fails nothing (once).
func (r *run) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, n := range r.res.notes {
		if n == msg {
			return
		}
	}
	r.res.notes = append(r.res.notes, msg)
}

// runOne runs one plan: the emulator, the receiver, the members, the
// writes with the faults, the drain, the stop, ferry verify and the check.
func runOne(ctx context.Context, p plan, s settings) (res runResult) {
	t0 := time.Now()
	res.plan = p
	defer func() { res.took = time.Since(t0) }()
	r := &run{p: p, s: s, res: &res}
	dir, err := os.MkdirTemp("", fmt.Sprintf("ferry-chaos-%d-", p.seed))
	if err != nil {
		r.fail("%v", err)
		return res
	}
	res.dir = dir
	defer func() {
		if !res.failed() && len(res.historyLost) == 0 && !s.keep {
			_ = os.RemoveAll(dir)
		}
	}()
	if r.e, err = newEnv(ctx, p, s.txnLifetime, dir); err != nil {
		r.fail("start the environment: %v", err)
		return res
	}
	defer r.e.close()
	r.windowStart = r.e.srv.Now().Truncate(time.Second).Add(time.Second)
	if p.sink == "mongodb" {
		if r.watch, err = watchProjection(ctx, r.e.target); err != nil {
			r.fail("watch the projection: %v", err)
			return res
		}
		defer r.watch.stop()
	}
	r.g = &group{e: r.e, slots: make([]*member, p.members), gen: make([]int, p.members)}
	defer r.g.killAll() // whatever happened, no process outlives its run
	if !r.startGroup(ctx) {
		return res
	}
	r.drive(ctx)
	r.drain(ctx)
	r.finish(ctx)
	return res
}

// startGroup starts the members and waits until every partition is owned
// and has recorded its start.
func (r *run) startGroup(ctx context.Context) bool {
	for i := range r.p.members {
		if err := r.g.start(i); err != nil {
			r.fail("start member %d: %v", i, err)
			return false
		}
	}
	e := r.e
	if !waitUntil(ctx, 60*time.Second, func() bool {
		return r.g.anyExited() || e.started(ctx) && len(e.owners(ctx)) == partitions
	}) || r.g.anyExited() {
		r.fail("the group did not start within 60 s (owners: %s)", describeOwners(e.owners(ctx)))
		r.g.collectLogs(r.res)
		return false
	}
	waitUntil(ctx, 2*time.Second, func() bool { return e.srv.Now().After(r.windowStart) })
	return true
}

// drive runs the writes for the plan's duration and the faults one after
// the other meanwhile, then clears whatever a fault left behind.
func (r *run) drive(ctx context.Context) {
	e := r.e
	r.w = newWriter(e.source, e.srv, r.p.seed, r.s.rate, r.p.shardKey == "ranged")
	r.g.w = r.w
	stop := make(chan struct{})
	writing := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(writing)
		r.w.run(stop, start.Add(r.p.duration-4*time.Second))
	}()
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }) }
	end := time.AfterFunc(r.p.duration, halt)
	defer end.Stop()
	defer context.AfterFunc(ctx, halt)() // interrupted: stop writing too
	for _, f := range r.p.faults {
		pause(ctx, time.Until(start.Add(f.at)))
		fr, err := r.g.inject(ctx, f)
		r.res.faults = append(r.res.faults, fr)
		if fr.Problem != "" {
			r.fail("%s", fr.Problem)
		}
		if err != nil {
			r.fail("fault %s: %v", f, err)
			break
		}
	}
	<-writing
	e.srv.ClearFailPoints()
	e.rcv.setFailing(false)
	if err := e.rcv.listen(); err != nil {
		r.fail("%v", err)
	}
	for _, m := range r.g.slots {
		if m.exited() && !m.killed {
			r.fail("member %s exited by itself: %v", m.id, m.err)
		}
	}
}

// deliveries returns what the sink received so far.
func (r *run) deliveries() []delivery {
	if r.p.sink == "webhook" {
		d, _ := r.e.rcv.snapshot()
		return d
	}
	d, err := r.watch.snapshot()
	if err != nil && r.p.historyLoss {
		// Its own position fell off the tiny oplog: the effects after it
		// are not seen; the final state is checked regardless.
		r.note("the projection's change stream stopped (%v): effects after it are not checked", err)
	} else if err != nil {
		r.fail("the projection's change stream failed: %v", err)
	}
	return d
}

// evaluate checks the run so far: finalState checks the latest version of
// every live document (after lost history) instead of every change;
// gaveUp are the partitions a member gave up recovering (history-lost);
// done reports whether nothing is missing.
func (r *run) evaluate(ctx context.Context, finalState bool, restarts []time.Time, gaveUp []historyFailure) (c checkResult, proj *verify.ProjectionReport, done bool) {
	var in checkInput
	c, proj, done, in = r.evaluateInput(ctx, finalState, restarts, gaveUp)
	r.res.input = in
	return c, proj, done
}

func (r *run) evaluateInput(ctx context.Context, finalState bool, restarts []time.Time, gaveUp []historyFailure) (c checkResult, proj *verify.ProjectionReport, done bool, in checkInput) {
	if n, err := pendingTTL(ctx, r.e.source); err != nil || n > 0 {
		return c, nil, false, in // the source is still changing
	}
	hist, live, err := r.w.finish(ctx)
	if err != nil {
		r.fail("the writer: %v", err)
		return c, nil, true, in
	}
	in = checkInput{Writes: hist, Deliveries: r.deliveries(), Faults: r.res.faults, FinalState: finalState, Live: live, Restarts: restarts}
	if len(gaveUp) > 0 {
		in.GaveUp, in.PartitionOf = r.givenUp(gaveUp), partitionOf
	}
	if finalState && r.p.sink == "mongodb" {
		in.Live = nil // the projection diff is the final state's check
	}
	c = check(in)
	done = len(c.Lost) == 0
	if r.p.sink == "mongodb" {
		pr, err := verify.Projection(ctx, r.e.source, r.e.target, 5)
		if err != nil {
			return c, nil, false, in
		}
		proj, done = &pr, done && pr.Clean()
	}
	return c, proj, done, in
}

// givenUp is the set of partitions whose history is given up: those of
// the failures, or every partition when the stream failed on every
// current member (a failed stream takes no partition: nobody is left to
// deliver any).
func (r *run) givenUp(fs []historyFailure) map[int]bool {
	out := map[int]bool{}
	failed := map[string]bool{}
	for _, f := range fs {
		out[f.Partition] = true
		failed[f.Member] = true
	}
	for _, m := range r.g.slots {
		if !failed[m.id] {
			return out
		}
	}
	for p := range partitions {
		out[p] = true
	}
	return out
}

// partitionOf is the partition of a document of the writer (its _id is a
// string): the one whose change stream and backfill carry it, the
// partition whose range of the hashed _id holds it (ferry.HashRange, the
// partitioning of the new streams the members run), as in ferry's
// partition filter.
func partitionOf(doc string) int {
	h, err := hashkey.Hash(doc)
	if err != nil {
		return -1 // a string always hashes
	}
	for p := range partitions {
		if ferry.InPartition(ferry.HashRange, h, p, partitions) {
			return p
		}
	}
	return -1
}

// drain waits until every change is delivered (after lost history: the
// final state), or the drain deadline. It ends early when what is missing
// lies in partitions a member gave up recovering (history-lost) and no
// member has started a backfill for 10 s: nothing more is coming.
func (r *run) drain(ctx context.Context) {
	var checked time.Time
	if !waitUntil(ctx, r.s.drain, func() bool {
		for _, m := range r.g.slots {
			if !m.exited() && !m.ready() {
				return false // a member started by the last fault: SIGTERM must find it up
			}
		}
		if _, _, done := r.evaluate(ctx, r.p.historyLoss, nil, nil); done {
			return true
		}
		if !r.p.historyLoss || time.Since(checked) < time.Second {
			return false
		}
		checked = time.Now()
		logs := r.g.readLogs()
		if len(logs.historyLost) == 0 || time.Since(logs.lastBackfill) < 10*time.Second {
			return false
		}
		_, _, done := r.evaluate(ctx, true, nil, logs.historyLost)
		return done
	}) {
		r.res.drainExpired = true
	}
}

// finish stops the members (each must exit on SIGTERM), runs ferry
// verify, reads the members' logs and checks the run.
func (r *run) finish(ctx context.Context) {
	for _, m := range r.g.slots {
		if err := m.terminate(15 * time.Second); err != nil {
			r.fail("%v", err)
		}
	}
	if _, bad := r.e.rcv.snapshot(); bad > 0 {
		r.fail("%d webhook requests failed their signature check", bad)
	}
	logs := r.g.collectLogs(r.res)
	r.res.backfills = logs.backfills
	r.res.historyLost = logs.historyLost
	// History is lost on purpose in these runs, but only a backfill shows
	// it was: without one, every change must have been delivered.
	finalState := r.p.historyLoss && logs.backfills > 0
	var done bool
	r.res.check, r.res.proj, done = r.evaluate(ctx, finalState, logs.restarts, logs.historyLost)
	if !done && len(r.res.check.Lost) == 0 && r.res.proj != nil && !r.res.proj.Clean() {
		r.fail("the projection differs from the source: %s%s", r.res.proj, r.explainProjection(ctx, *r.res.proj))
	}
	if r.res.drainExpired && !done {
		r.fail("the drain ran out (-drain %v) before everything was delivered: what is reported lost was not delivered by then "+
			"(ferry verify below tells applied, pending and missing apart)", r.s.drain)
	}
	r.verify(ctx, finalState)
}

// explainProjection describes the documents a projection diff names: the
// projection's stamp of each (operation, lease epoch, cluster time, when it
// was written, whether a backfill wrote it; not the document) and what
// the writer did to it, so a failed run says who wrote what and when.
func (r *run) explainProjection(ctx context.Context, pr verify.ProjectionReport) string {
	var b strings.Builder
	hist := map[string][]write{}
	for _, w := range r.res.input.Writes {
		hist[w.Doc] = append(hist[w.Doc], w)
	}
	for _, ids := range []struct {
		kind string
		ids  []bson.RawValue
	}{{"missing", pr.MissingIDs}, {"extra", pr.ExtraIDs}, {"stale", pr.StaleIDs}} {
		for _, id := range ids.ids {
			// The target _id: the source's, or on {k: 1} the documentKey {k, _id}.
			doc, ok := id.StringValueOK()
			if key, isDoc := id.DocumentOK(); !ok && isDoc {
				doc, _ = key.Lookup("_id").StringValueOK()
			}
			fmt.Fprintf(&b, "\n    %s %s (partition %d):", ids.kind, doc, partitionOf(doc))
			var got struct {
				Stamp struct {
					Op    string         `bson:"op"`
					Epoch int64          `bson:"epoch"`
					CT    bson.Timestamp `bson:"ct"`
					At    time.Time      `bson:"at"`
					Del   bool           `bson:"del"`
					BF    bool           `bson:"bf"`
				} `bson:"_ferry"`
			}
			err := r.e.target.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne().SetProjection(bson.D{{Key: "_ferry", Value: 1}})).Decode(&got)
			if err != nil {
				fmt.Fprintf(&b, " projection: %v;", err)
			} else {
				st := got.Stamp
				fmt.Fprintf(&b, " projection stamp op=%s epoch=%d ct=%d.%d at=%s deleted=%v backfill=%v;",
					st.Op, st.Epoch, st.CT.T, st.CT.I, st.At.Format("15:04:05.000"), st.Del, st.BF)
			}
			for _, w := range hist[doc] {
				at := "ttl"
				if !w.At.IsZero() {
					at = w.At.Format("15:04:05.000")
				}
				fmt.Fprintf(&b, " v%d %s %s,", w.V, w.Op, at)
			}
		}
	}
	return b.String()
}

// verify runs ferry verify over the run's window: nothing may be missing,
// and it must have read every change the writer made.
func (r *run) verify(ctx context.Context, historyLost bool) {
	v := r.e.verify(ctx, r.windowStart)
	r.res.verify = v
	r.res.verifyExempt = historyLost
	switch {
	case v.err != nil && r.p.historyLoss && v.windowLost:
		r.note("ferry verify cannot read the run's window: the tiny oplog no longer holds a second of it")
	case v.err != nil:
		r.fail("ferry verify: %v", v.err)
	case v.missing > 0 && historyLost:
		r.note("ferry verify counts %d changes missing: changes before a backfill's marker whose effect the scan "+
			"covers (the final state is checked instead)", v.missing)
	case v.missing > 0:
		r.fail("ferry verify found %d missing changes:\n%s", v.missing, indent(v.output))
	case !r.p.historyLoss && v.events != r.res.check.Writes:
		r.fail("ferry verify read %d events in the run's window, the writer made %d changes", v.events, r.res.check.Writes)
	}
}
