package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/hashkey"
)

// `bench snapshot` measures snapshots (issue 27, "How it is judged") in
// one run, scenario by scenario, each on new emulators and members:
//
//   - reads: a raw find loop, then a snapshot without and one with an
//     {_id: "hashed"} index: their rates, the ratio to the raw loop, and
//     what the server examined and returned; peak RSS.
//   - filter: a filtered request re-delivers exactly the matching
//     documents (on the reads scenario's setup when both run).
//   - kill: SIGKILL of a member at about half of the snapshot; the
//     survivor takes over and resumes; rows delivered again per partition;
//     every document delivered; the projection equals the source.
//   - writes: inserts, updates and deletes during the snapshot; the
//     projection equals the source; the stream's lag throughout.
//   - oplog: a snapshot outlasting a small oplog's window under writes
//     finishes, and the projection equals the source.

func runSnapshotBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseSnapOptions(args, stderr)
	if err != nil {
		return err
	}
	b := &snapBench{o: o, stderr: stderr, r: newSnapReport(o)}
	b.r.noteLoad()
	for _, sc := range b.plan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.run(ctx, sc); err != nil {
			if ctx.Err() != nil {
				return err // interrupted
			}
			b.progress("%s FAILED: %v", sc.name, err)
			b.r.Errors = append(b.r.Errors, scenarioError{Scenario: sc.name, Error: err.Error()})
		}
	}
	b.r.noteLoad()
	b.r.MethodNotes = snapMethodNotes(o)
	if o.json {
		err = b.r.writeJSON(stdout)
	} else {
		b.r.writeTable(stdout)
	}
	return errors.Join(err, b.r.failures())
}

func (r *snapReport) noteLoad() {
	if v, ok := loadAverage(); ok {
		r.Machine.Load = append(r.Machine.Load, v)
	}
}

type snapBench struct {
	o      *snapSettings
	stderr io.Writer
	r      *snapReport
}

func (b *snapBench) progress(format string, args ...any) {
	fmt.Fprintf(b.stderr, "bench snapshot: "+format+"\n", args...)
}

// setup is one setup's scenarios.
type setup struct {
	name string
	spec envSpec
	run  func(ctx context.Context, e *snapEnv) error
}

// plan is the setups the selected scenarios need, in order.
func (b *snapBench) plan() []setup {
	o := b.o
	var out []setup
	if o.runs("reads") || o.runs("filter") {
		var names []string
		for _, s := range []string{"reads", "filter"} {
			if o.runs(s) {
				names = append(names, s)
			}
		}
		out = append(out, setup{name: strings.Join(names, "+"),
			spec: envSpec{docs: o.docs, sink: "none", hashed: !o.runs("reads")},
			run: func(ctx context.Context, e *snapEnv) error {
				if o.runs("reads") {
					if err := b.reads(ctx, e); err != nil {
						return err
					}
				}
				if o.runs("filter") {
					return b.filter(ctx, e)
				}
				return nil
			}})
	}
	if o.runs("kill") {
		out = append(out, setup{name: "kill", spec: envSpec{docs: o.docs, sink: "mongodb", hashed: true, rate: o.rate}, run: b.kill})
	}
	if o.runs("writes") {
		out = append(out, setup{name: "writes", spec: envSpec{docs: o.docs, sink: "mongodb", hashed: true, rate: o.rate}, run: b.writes})
	}
	if o.runs("oplog") {
		// The snapshot is to take about three times the oplog's window at
		// the writers' rate: its rate is capped there, unless it is
		// slower anyway.
		window := float64(o.oplogEntries) / o.oplogWrites
		rate := float64(o.oplogDocs) / float64(o.partitions) / (3 * window)
		out = append(out, setup{name: "oplog", spec: envSpec{docs: o.oplogDocs, oplogEntries: o.oplogEntries, sink: "mongodb",
			hashed: true, rate: rate}, run: b.oplog})
	}
	return out
}

// run runs one setup's scenarios on a new setup, then reports its
// processes' peak RSS.
func (b *snapBench) run(ctx context.Context, sc setup) (err error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	sc.spec.name = sc.name
	e, err := newSnapEnv(ctx, b.o, sc.spec, b.progress)
	if err != nil {
		return err
	}
	defer func() {
		cerr := e.close()
		if err == nil {
			err = cerr
		}
		scen := strings.Split(sc.name, "+")[0]
		var rss []string
		var peak int64
		for i, v := range e.memberRSS {
			rss = append(rss, fmt.Sprintf("member %d %s", i+1, mib(v)))
			peak = max(peak, v)
		}
		b.r.info(scen, "rss.members", "peak RSS of the members", float64(peak), strings.Join(rss, ", "))
		b.r.info(scen, "rss.source", "peak RSS of the source emulator", float64(e.srcRSS), mib(e.srcRSS))
		b.r.info(scen, "rss.target", "peak RSS of the target emulator (state, projection)", float64(e.tgtRSS), mib(e.tgtRSS))
	}()
	if err := sc.run(ctx, e); err != nil {
		return fmt.Errorf("%w%s", err, e.memberLogs(3000))
	}
	return nil
}

// snapResult is one measured snapshot.
type snapResult struct {
	progress []ferry.SnapshotProgress
	docs     int64
	took     time.Duration
	rate     float64
	returned int64 // the source's serverStatus deltas
	examined int64
	rows     rowStats
	// CPU time from the request to the last partition's end: the source
	// emulator's, and the members' together.
	srcCPU, memberCPU time.Duration
}

// cpu is the CPU time the source emulator and the live members used so
// far (each child's own getrusage).
func (e *snapEnv) cpu() (src, members time.Duration, err error) {
	u, err := e.src.usage()
	if err != nil {
		return 0, 0, err
	}
	for _, m := range e.members {
		if m == nil {
			continue
		}
		mu, err := m.usage()
		if err != nil {
			return 0, 0, err
		}
		members += mu.cpu()
	}
	return u.cpu(), members, nil
}

// startProfiles starts CPU profiles of the source emulator and the
// members into dir, named after what.
func (e *snapEnv) startProfiles(dir, what string) (stop func() error, err error) {
	paths := map[*child]string{e.src: filepath.Join(dir, what+"-emulator.pprof")}
	for i, m := range e.members {
		if m != nil {
			paths[m] = filepath.Join(dir, fmt.Sprintf("%s-member-%d.pprof", what, i+1))
		}
	}
	return profileChildren(paths)
}

// snapshot requests a snapshot (filter nil: all) and measures it; each
// poll of the store's progress goes to every.
func (e *snapEnv) snapshot(ctx context.Context, filter bson.Raw, every func([]ferry.SnapshotProgress) error) (*snapResult, error) {
	if err := e.sync(); err != nil {
		return nil, err
	}
	e.rows.reset()
	r0, x0, err := e.serverCounts(ctx)
	if err != nil {
		return nil, err
	}
	if e.profile != "" {
		stop, err := e.startProfiles(e.profile, "snapshot")
		if err != nil {
			return nil, err
		}
		defer func() { _ = stop() }()
	}
	src0, mem0, err := e.cpu()
	if err != nil {
		return nil, err
	}
	req, err := e.request(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("request a snapshot: %w", err)
	}
	ps, err := e.awaitSnapshot(ctx, req.ID, every)
	if err != nil {
		return nil, err
	}
	src1, mem1, err := e.cpu()
	if err != nil {
		return nil, err
	}
	r1, x1, err := e.serverCounts(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.sync(); err != nil {
		return nil, err
	}
	res := &snapResult{progress: ps, returned: r1 - r0, examined: x1 - x0, rows: e.rows.stats(), srcCPU: src1 - src0, memberCPU: mem1 - mem0}
	res.docs, res.took = span(ps)
	if res.took > 0 {
		res.rate = float64(res.docs) / res.took.Seconds()
	}
	e.progress("%s: snapshot %s: %d documents in %s (%s docs/s), %s mode; the server returned %d and examined %d; CPU: emulator %s, members %s",
		e.spec.name, req.ID, res.docs, res.took.Round(time.Millisecond), rateText(res.rate), ps[0].Mode, res.returned, res.examined,
		res.srcCPU.Round(time.Millisecond), res.memberCPU.Round(time.Millisecond))
	return res, nil
}

// perDoc is d per document, in µs.
func perDoc(d time.Duration, docs int64) float64 {
	if docs <= 0 {
		return 0
	}
	return float64(d) / 1e3 / float64(docs)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func findBatch(n int) *options.FindOptionsBuilder {
	return options.Find().SetBatchSize(int32(min(n, math.MaxInt32)))
}

// reads: the raw loop, then a snapshot in _id order (no hashed index),
// then one through the hashed index.
func (b *snapBench) reads(ctx context.Context, e *snapEnv) error {
	const sc = "reads"
	n := float64(e.spec.docs)
	var best float64
	var rates []string
	var rawCPU string
	stopProfiles := func() error { return nil }
	if b.o.profile != "" {
		var err error
		if stopProfiles, err = e.startProfiles(b.o.profile, "raw"); err != nil {
			return err
		}
	}
	for range 2 {
		src0, _, err := e.cpu()
		if err != nil {
			return err
		}
		self0 := selfUsage()
		got, took, err := rawFind(ctx, e.coll, b.o.chunk)
		if err != nil {
			return fmt.Errorf("raw find loop: %w", err)
		}
		self1 := selfUsage()
		src1, _, err := e.cpu()
		if err != nil {
			return err
		}
		if got != int64(e.spec.docs) {
			return fmt.Errorf("raw find loop: read %d documents of %d", got, e.spec.docs)
		}
		rate := float64(got) / took.Seconds()
		rates = append(rates, rateText(rate))
		if rate > best {
			best = rate
			rawCPU = fmt.Sprintf("CPU per document: emulator %.1f µs, this process %.1f µs", perDoc(src1-src0, got), perDoc(self1.cpu()-self0.cpu(), got))
		}
	}
	if err := stopProfiles(); err != nil {
		return err
	}
	b.progress("reads: raw find loop: %s docs/s", strings.Join(rates, ", "))
	b.r.info(sc, "raw", fmt.Sprintf("raw driver find loop, batch %d (best of %s)", b.o.chunk, strings.Join(rates, ", ")), best,
		rateText(best)+" docs/s; "+rawCPU)

	measure := func(mode, title, key string) error {
		res, err := e.snapshot(ctx, nil, nil)
		if err != nil {
			return err
		}
		if got := res.progress[0].Mode; got != mode {
			return fmt.Errorf("the snapshot read in %s mode, not %s", got, mode)
		}
		r := ratio(res.rate, best)
		text := fmt.Sprintf("%s docs/s (%s), %.2f of raw; CPU per document: emulator %.1f µs, members %.1f µs", rateText(res.rate),
			res.took.Round(time.Millisecond), r, perDoc(res.srcCPU, res.docs), perDoc(res.memberCPU, res.docs))
		if key == "hashed" {
			b.r.judge(sc, key+".rate", "snapshot rate, "+title, r, text, "≥ 0.5 of raw", r >= 0.5)
		} else {
			b.r.info(sc, key+".rate", "snapshot rate, "+title, r, text)
		}
		ret, ex := float64(res.returned)/n, float64(res.examined)/n
		b.r.judge(sc, key+".returned", "documents returned by the server / collection, "+title, ret,
			fmt.Sprintf("%.3f (%d)", ret, res.returned), "≤ 1.1", ret <= 1.1)
		if key == "hashed" {
			b.r.judge(sc, key+".examined", "documents examined by the server / collection, "+title, ex,
				fmt.Sprintf("%.3f (%d)", ex, res.examined), "≤ 1.1", ex <= 1.1)
		} else {
			// As documented: each partition walks the _id index, the server
			// evaluating the partition filter, so every document is examined
			// once per partition.
			p := float64(b.o.partitions)
			b.r.judge(sc, key+".examined", "documents examined by the server / collection, "+title, ex,
				fmt.Sprintf("%.3f (%d)", ex, res.examined), fmt.Sprintf("≈ %d (partitions, as documented), ±10%%", b.o.partitions),
				math.Abs(ex-p) <= 0.1*p)
		}
		complete := res.rows.Distinct == int64(e.spec.docs) && res.docs == int64(e.spec.docs)
		b.r.judge(sc, key+".delivered", "documents delivered, "+title, float64(res.rows.Distinct),
			fmt.Sprintf("%d of %d (%d rows, %d counted done)", res.rows.Distinct, e.spec.docs, res.rows.Total, res.docs),
			"all", complete)
		return nil
	}
	if err := measure(ferry.SnapshotByID, "no hashed index (id-order mode)", "id"); err != nil {
		return fmt.Errorf("the snapshot without a hashed index: %w", err)
	}
	if err := e.createHashedIndex(ctx); err != nil {
		return err
	}
	e.profile = b.o.profile
	defer func() { e.profile = "" }()
	if err := measure(ferry.SnapshotByHashedIndex, "{_id: \"hashed\"} index (hashed-index mode)", "hashed"); err != nil {
		return fmt.Errorf("the snapshot with a hashed index: %w", err)
	}
	return nil
}

// filter: a request with a filter delivers exactly the matching
// documents, each once.
func (b *snapBench) filter(ctx context.Context, e *snapEnv) error {
	const sc, g = "filter", 3
	filter, err := bson.Marshal(bson.D{{Key: "g", Value: int32(g)}})
	if err != nil {
		return err
	}
	matching, err := e.coll.CountDocuments(ctx, filter)
	if err != nil {
		return err
	}
	res, err := e.snapshot(ctx, filter, nil)
	if err != nil {
		return err
	}
	var unmatched, missing int64
	e.rows.each(func(id int64, _ uint32) {
		if id%10 != g {
			unmatched++
		}
	})
	for id := int64(g); id < int64(e.spec.docs); id += 10 {
		if e.rows.count(id) == 0 {
			missing++
		}
	}
	ok := res.rows.Total == matching && res.rows.Distinct == matching && unmatched == 0 && missing == 0
	b.r.judge(sc, "exact", "filtered request {g: 3}: rows delivered", float64(res.rows.Total),
		fmt.Sprintf("%d rows, %d distinct; %d documents match; %d delivered that do not, %d matching not delivered",
			res.rows.Total, res.rows.Distinct, matching, unmatched, missing), "= the matching documents, each once", ok)
	examined := float64(res.examined) / float64(e.spec.docs)
	b.r.judge(sc, "examined", "documents the server examined / collection, filtered request ({_id: \"hashed\"} index)", examined,
		fmt.Sprintf("%.3f (%d examined, %d returned): each partition reads its hashed range once; the estimate is extrapolated, not counted", examined, res.examined, res.returned),
		"≤ 1.1", examined <= 1.1)
	return nil
}

// partitionOf is the hash-range partition of document id.
func partitionOf(id int64, partitions int) int {
	h, err := hashkey.Hash(id)
	if err != nil {
		return -1
	}
	for p := range partitions {
		if ferry.InPartition(ferry.HashRange, h, p, partitions) {
			return p
		}
	}
	return -1
}

// kill: SIGKILL of the second member at about half of the snapshot.
func (b *snapBench) kill(ctx context.Context, e *snapEnv) error {
	const sc = "kill"
	n := int64(e.spec.docs)
	victim := len(e.members) - 1
	var killedAt time.Time
	var atKill []ferry.SnapshotProgress
	var owned []int
	var victimRSS int64
	var resumedAfter time.Duration
	every := func(ps []ferry.SnapshotProgress) error {
		var done int64
		for _, x := range ps {
			done += x.Done
		}
		switch {
		case killedAt.IsZero() && done >= n/2:
			sts, err := e.memberStatuses()
			if err != nil {
				return err
			}
			owned = sts[victim].Owned
			if victimRSS, err = e.members[victim].kill(); err != nil {
				return err
			}
			killedAt = time.Now()
			e.members[victim] = nil
			e.memberRSS[victim] = victimRSS
			b.progress("kill: SIGKILL to member %d (partitions %v) at %d of %d documents done", victim+1, owned, done, n)
		case killedAt.IsZero():
		case atKill == nil:
			// The first progress read after the kill: what the dead member
			// recorded last (it may have finished a chunk since the read
			// before the kill), before the survivor can take over.
			atKill = slices.Clone(ps)
		case resumedAfter == 0:
			for _, p := range owned {
				if ps[p].Done > atKill[p].Done || !ps[p].Running() && atKill[p].Running() {
					resumedAfter = time.Since(killedAt)
					break
				}
			}
		}
		return nil
	}
	res, err := e.snapshot(ctx, nil, every)
	if err != nil {
		return err
	}
	if killedAt.IsZero() {
		return errors.New("the snapshot finished before half of it was done: nothing was killed")
	}
	var doneAtKill int64
	unfinished := 0
	for _, x := range atKill {
		doneAtKill += x.Done
	}
	for _, p := range owned {
		if atKill[p].Running() {
			unfinished++
		}
	}
	b.r.info(sc, "at", "SIGKILL of a member", float64(doneAtKill)/float64(n),
		fmt.Sprintf("member %d (partitions %v) at %.0f%% (%d of %d done); takeover and first progress %s later",
			victim+1, owned, 100*float64(doneAtKill)/float64(n), doneAtKill, n, resumedAfter.Round(100*time.Millisecond)))

	// Resumed on the survivor: it owns every partition, and each of the
	// killed member's partitions finished the same snapshot, from where
	// the record stood.
	sts, err := e.memberStatuses()
	if err != nil {
		return err
	}
	survivor := sts[0]
	resumed := len(survivor.Owned) == b.o.partitions && unfinished > 0
	var how []string
	for _, p := range owned {
		x, k := res.progress[p], atKill[p]
		same := x.ID == k.ID && !x.Running() && !x.Cancelled
		resumed = resumed && same
		how = append(how, fmt.Sprintf("p%d %d→%d", p, k.Done, x.Done))
	}
	logged := strings.Count(e.members[0].stderr.String(), "snapshot resumed")
	b.r.judge(sc, "resumed", "the snapshot resumes on the survivor", float64(unfinished),
		fmt.Sprintf("survivor owns %v; killed member's partitions done at kill → at end: %s; %d unfinished at the kill; survivor logged 'snapshot resumed' %d×",
			survivor.Owned, strings.Join(how, ", "), unfinished, logged),
		"survivor finishes them, same snapshot", resumed)

	// Read again: rows beyond the first, per partition.
	again := make([]int64, b.o.partitions)
	var missing int64
	e.rows.each(func(id int64, c uint32) {
		if c > 1 {
			if p := partitionOf(id, b.o.partitions); p >= 0 {
				again[p] += int64(c - 1)
			}
		}
	})
	for id := range n {
		if e.rows.count(id) == 0 {
			missing++
		}
	}
	worst := slices.Max(again)
	b.r.judge(sc, "again", "documents delivered again, per partition", float64(worst),
		fmt.Sprintf("%d in all (%v); %d rows for %d documents", res.rows.Again, again, res.rows.Total, n),
		fmt.Sprintf("≤ %d (one chunk) each", b.o.chunk), worst <= int64(b.o.chunk) && res.rows.Again <= int64(b.o.partitions*b.o.chunk))
	// The server's side: what it returned beyond the collection, less the
	// one document each chunk reads of the next (cutHashed).
	var chunks int64
	for _, x := range res.progress {
		chunks += x.Chunks
	}
	boundary := max(chunks-int64(b.o.partitions), 0)
	reread := res.returned - n - boundary
	b.r.judge(sc, "server.again", "documents the server read again", float64(reread),
		fmt.Sprintf("%d (returned %d for %d documents, %d of them the next chunk's first document, read by two chunks)",
			reread, res.returned, n, boundary), fmt.Sprintf("≤ %d (one chunk, and its next document, per partition)", b.o.partitions*(b.o.chunk+1)),
		reread <= int64(b.o.partitions*(b.o.chunk+1)))
	b.r.judge(sc, "once", "documents delivered at least once", float64(n-missing),
		fmt.Sprintf("%d of %d", n-missing, n), "all", missing == 0)
	return b.projection(ctx, e, sc, "the projection equals the source after the kill")
}

// projection waits until the stream applied every change, compares the
// projection with the source and judges it.
func (b *snapBench) projection(ctx context.Context, e *snapEnv, sc, title string) error {
	at, err := e.marker(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := e.converge(ctx, at, 2*time.Minute); err != nil {
		return err
	}
	caughtUp := time.Since(start)
	start = time.Now()
	d, err := compareProjection(ctx, e.coll, e.proj)
	if err != nil {
		return err
	}
	b.progress("%s: caught up in %s, compared in %s: %s", sc, caughtUp.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), d)
	b.r.judge(sc, "projection", title, float64(d.Missing+d.Resurrected+d.Stale), d.String(),
		"0 missing, resurrected, stale", d.equal() && d.Source > 0)
	return nil
}

// writes: inserts, updates and deletes during the snapshot.
func (b *snapBench) writes(ctx context.Context, e *snapEnv) error {
	const sc = "writes"
	lag := e.watchLag(ctx)
	w := startWriter(ctx, e.coll, e.spec.docs, b.o.writesPerS, b.o.docSize)
	res, err := e.snapshot(ctx, nil, nil)
	ws, werr := w.stop()
	if err = errors.Join(err, werr); err != nil {
		_, _, _ = lag.stop()
		return err
	}
	b.r.info(sc, "writes", "writes during the snapshot", ws.rate(),
		fmt.Sprintf("%d in %s (%.0f/s): %d inserts, %d updates, %d deletes, %d of deleted documents",
			ws.total(), ws.Took.Round(time.Millisecond), ws.rate(), ws.Inserts, ws.Updates, ws.Deletes, ws.Misses))
	b.r.info(sc, "rate", "snapshot rate, into the projection, under writes", res.rate,
		fmt.Sprintf("%s docs/s (%d documents in %s)", rateText(res.rate), res.docs, res.took.Round(time.Millisecond)))
	perr := b.projection(ctx, e, sc, "the projection equals the source after the writes")
	maxLag, text, lerr := lag.stop()
	if err := errors.Join(perr, lerr); err != nil {
		return err
	}
	b.r.judge(sc, "lag", "the stream's lag, maximum", maxLag, text, "< 5 s", maxLag < 5 && lag.samples > 0)
	b.r.info(sc, "leases", "leases the members lost (their logs)", float64(e.leaseLosses()),
		fmt.Sprintf("%d partition and membership leases lost (each a hand-off: the snapshot resumes at its next chunk)", e.leaseLosses()))
	return nil
}

// oplog: a snapshot that outlasts the oplog's window, under writes.
func (b *snapBench) oplog(ctx context.Context, e *snapEnv) error {
	const sc = "oplog"
	win, err := e.watchWindow(ctx)
	if err != nil {
		return err
	}
	lag := e.watchLag(ctx)
	w := startWriter(ctx, e.coll, e.spec.docs, b.o.oplogWrites, b.o.docSize)
	res, err := e.snapshot(ctx, nil, nil)
	ws, werr := w.stop()
	window, wsamples, winErr := win.stop()
	if err = errors.Join(err, werr, winErr); err != nil {
		_, _, _ = lag.stop()
		return err
	}
	b.r.info(sc, "writes", "writes during the snapshot", ws.rate(),
		fmt.Sprintf("%d in %s (%.0f/s)", ws.total(), ws.Took.Round(time.Millisecond), ws.rate()))
	b.r.judge(sc, "outlasts", "the snapshot outlasts the oplog window, and finishes", res.took.Seconds(),
		fmt.Sprintf("%d documents in %s; the %d-entry oplog held at most %s (%d samples)", res.docs,
			res.took.Round(time.Millisecond), b.o.oplogEntries, window, wsamples),
		"longer than the window; finished", res.took > window && wsamples > 0)
	perr := b.projection(ctx, e, sc, "the projection equals the source")
	maxLag, text, lerr := lag.stop()
	if err := errors.Join(perr, lerr); err != nil {
		return err
	}
	b.r.info(sc, "lag", "the stream's lag, maximum", maxLag, text)
	return nil
}
