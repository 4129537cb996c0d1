package ferry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/backoff"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongoerr"
)

// A snapshot delivers the documents already in the stream's scope, in
// this partition, as backfill events, while the stream goes on:
//
//   - In chunks. The snapshot's goroutine (snapshotLoop) reads the
//     partition's next chunk of documents (readChunk) and records, once
//     every document of it is finished, where the next chunk starts, in
//     the checkpoint (its Snapshot record), with the checkpoint's
//     compare-and-set under the lease epoch. A crash, a takeover or a
//     redeploy goes on at the first chunk not finished: at most one chunk
//     per partition is read and delivered again.
//
//   - Spliced into the stream at a cluster time. Before a chunk is read,
//     the reader tells the snapshot its position (splice.at: every event
//     up to that cluster time is dispatched, none after it), and from then
//     on holds back any event after it; the chunk is read as of that time
//     (readConcern snapshot, atClusterTime) and its documents are
//     dispatched right there, before the events after it. Each document's
//     lane then sees its changes up to at, its snapshot copy as of at, and
//     its changes after at, in the source's order: a document updated or
//     deleted during the snapshot ends in its latest state, never
//     resurrected by an older copy, never left stale. The stream is held
//     for one chunk read at most (its lag stays bounded however long the
//     snapshot runs), and the oplog only has to hold the stream's own
//     window, not the snapshot's duration.
//
//   - Read once. See readChunk and snapshotMode: with hashed-range
//     partitions and an {_id: "hashed"} index the server examines and
//     returns each document once over all partitions; without the index it
//     returns each once and examines each once per partition.
//
// Nothing is written to the source: the snapshot's state is the checkpoint's.

// snapshotRec returns the checkpoint's snapshot record (nil: none).
func (r *runner) snapshotRec() *snapshotRecord {
	r.saveMu.Lock()
	raw := r.cp.Snapshot
	r.saveMu.Unlock()
	if len(raw) == 0 {
		return nil
	}
	rec, err := decodeSnapshot(raw)
	if err != nil {
		r.c.log.Error("the checkpoint's snapshot record cannot be read; it is ignored", "err", err)
		return nil
	}
	return rec
}

// newSnapshot makes the record of a snapshot that begins now.
func (r *runner) newSnapshot(ctx context.Context, reason string) (*snapshotRecord, error) {
	since, err := r.serverTime(ctx)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &snapshotRecord{ID: time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(id[:4]),
		Reason: reason, Since: since, Started: time.Now(), Sweep: r.c.cfg.sweeper != nil && reason != SnapshotForRequest}, nil
}

// setSnapshot makes rec the checkpoint's snapshot record, to be written by
// the next save (the caller saves, or the stream's next flush does).
// Callers hold saveMu.
func (r *runner) setSnapshotLocked(rec *snapshotRecord) error {
	raw, err := rec.encode()
	if err != nil {
		return err
	}
	r.cp.Snapshot = raw
	r.snap.mu.Lock()
	r.snap.gen++
	r.snap.mu.Unlock()
	select {
	case r.snap.wake <- struct{}{}:
	default:
	}
	return nil
}

// saveSnapshot writes rec with the checkpoint (compare-and-set, fenced).
//
// gen is the record's generation as the caller read it: when the reader
// replaced the record since (history lost), nothing is written and
// errSnapshotReplaced returned, so an older snapshot's progress never
// overwrites the newer record.
func (r *runner) saveSnapshot(ctx context.Context, rec *snapshotRecord, gen int64) error {
	raw, err := rec.encode()
	if err != nil {
		return err
	}
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	if r.snapGen() != gen {
		return errSnapshotReplaced
	}
	next := r.cp
	next.Snapshot = raw
	return r.save(ctx, next, false)
}

// upRate is the documents per second since this member took rec up (0
// until a chunk of it finished here).
func (r *runner) upRate(rec *snapshotRecord) float64 {
	if el := time.Since(r.snap.upSince); r.snap.upID == rec.ID && r.snap.upDone > 0 && el > 0 {
		return float64(r.snap.upDone) / el.Seconds()
	}
	return 0
}

func (r *runner) snapGen() int64 {
	r.snap.mu.Lock()
	defer r.snap.mu.Unlock()
	return r.snap.gen
}

// showSnapshot publishes rec in Status and to the hooks: while it runs,
// with the rate since this member took it up; once finished, with the rate
// its record froze at its last chunk.
func (r *runner) showSnapshot(rec *snapshotRecord) {
	p := rec.progress()
	if rec.running() {
		p.Rate = r.upRate(rec)
	}
	r.c.setStatus(func(s *Status) { s.Snapshot = &p })
	r.c.hooks.snapshot(SnapshotInfo{Stream: r.c.cfg.name, Partition: r.c.cfg.partition, Progress: p})
}

// maxSnapshotError bounds the error a snapshot record keeps.
const maxSnapshotError = 300

// noteChunkFailure records a failed try of the snapshot's current chunk
// in its record (SnapshotProgress.Failures and Error), so a chunk that
// keeps failing shows in ferry status and ferry snapshot -wait rather
// than only in this member's log. Best effort: when the store is what
// fails, the log line is all there is.
func (r *runner) noteChunkFailure(ctx context.Context, gen int64, err error) {
	rec := r.snapshotRec()
	if !rec.running() {
		return
	}
	msg := RedactTokens(err.Error())
	if len(msg) > maxSnapshotError {
		msg = strings.ToValidUTF8(msg[:maxSnapshotError], "") + "..."
	}
	rec.Failures++
	rec.Error = msg
	if serr := r.saveSnapshot(ctx, rec, gen); serr != nil {
		r.c.log.Debug("snapshot: cannot record the chunk's failure", "err", serr)
		return
	}
	r.showSnapshot(rec)
}

// snapshotLoop runs the partition's snapshots until ctx ends: the one the
// checkpoint records as in progress, then the operator's requests.
func (r *runner) snapshotLoop(ctx context.Context) {
	cfg := &r.c.cfg
	reqs, _ := cfg.store.(checkpoint.SnapshotRequests)
	wait := cfg.backoffMin
	var lastPoll time.Time
	for ctx.Err() == nil {
		gen := r.snapGen()
		rec := r.snapshotRec()
		if rec != nil {
			r.showSnapshot(rec)
		}
		if rec.running() {
			err := r.runSnapshot(ctx, gen, rec, reqs)
			if err == nil {
				wait = cfg.backoffMin
				continue
			}
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errSnapshotReplaced) {
				continue
			}
			if errors.Is(err, errSpliceNotReady) {
				if !backoff.Sleep(ctx, cfg.backoffMin) {
					return
				}
				continue
			}
			var stop *stopError
			if errors.As(err, &stop) || errors.Is(err, checkpoint.ErrFenced) {
				r.fail(err)
				return
			}
			r.c.log.Warn("snapshot: a chunk failed; retrying", "err", RedactTokens(err.Error()), "in", wait)
			r.noteChunkFailure(ctx, gen, err)
			if !backoff.Sleep(ctx, backoff.Jitter(wait)) {
				return
			}
			wait = min(wait*2, cfg.backoffMax)
			continue
		}
		if reqs != nil && time.Since(lastPoll) >= cfg.snapshotPoll {
			lastPoll = time.Now()
			if next, err := r.requested(ctx, reqs, rec); err != nil {
				if ctx.Err() != nil {
					return
				}
				r.c.log.Warn("snapshot: cannot read the operator's requests", "err", err)
			} else if next != nil {
				if err := r.saveSnapshot(ctx, next, gen); err != nil {
					if errors.Is(err, checkpoint.ErrFenced) {
						r.fail(err)
						return
					}
					if !errors.Is(err, errSnapshotReplaced) {
						r.c.log.Warn("snapshot: cannot record the requested snapshot; retrying", "err", err)
					}
				} else {
					r.c.log.Info("snapshot requested", "snapshot", next.ID, "request", next.Request, "filtered", len(next.Filter) > 0)
				}
				continue
			}
		}
		t := time.NewTimer(cfg.snapshotPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.snap.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// requested returns the record of the operator's request to start, if
// the stream's current request is new to this partition.
func (r *runner) requested(ctx context.Context, reqs checkpoint.SnapshotRequests, last *snapshotRecord) (*snapshotRecord, error) {
	req, err := reqs.SnapshotRequest(ctx, r.c.cfg.name)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if req.Cancelled || last != nil && last.Request == req.ID {
		return nil, nil
	}
	rec, err := r.newSnapshot(ctx, SnapshotForRequest)
	if err != nil {
		return nil, err
	}
	rec.Request, rec.Filter = req.ID, req.Filter
	return rec, nil
}

// errSpliceNotReady: the reader has no position yet; the snapshot asks
// again shortly.
var errSpliceNotReady = errors.New("ferry: snapshot: the stream has no position yet")

// errSnapshotReplaced: the record changed under the snapshot (history
// lost, or a newer request): it starts over from the new one.
var errSnapshotReplaced = errors.New("ferry: snapshot replaced")

// runSnapshot reads rec's chunks, from where it stands, to its end (gen:
// the record's generation when it was read).
func (r *runner) runSnapshot(ctx context.Context, gen int64, rec *snapshotRecord, reqs checkpoint.SnapshotRequests) error {
	cfg := &r.c.cfg
	namespaces, err := r.scopeNamespaces(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(namespaces, func(a, b Namespace) int {
		switch {
		case a.String() < b.String():
			return -1
		case a.String() > b.String():
			return 1
		}
		return 0
	})
	if rec.Total == 0 && rec.Done == 0 {
		rec.Total = r.estimate(ctx, namespaces, rec)
	}
	r.snap.upID, r.snap.upDone, r.snap.upSince = rec.ID, 0, time.Now()
	switch {
	case r.snap.announced == rec.ID:
		// A retry after a failed chunk, logged as such.
	case rec.Done > 0 || rec.Chunks > 0:
		r.c.log.Info("snapshot resumed", "snapshot", rec.ID, "reason", rec.Reason, "done", rec.Done, "chunks", rec.Chunks, "estimated", rec.Total)
	default:
		r.c.log.Info("snapshot started", "snapshot", rec.ID, "reason", rec.Reason, "estimated", rec.Total)
	}
	r.snap.announced = rec.ID
	r.showSnapshot(rec)
	lastPoll := time.Now()
	for _, ns := range namespaces {
		if rec.NS != "" && ns.String() < rec.NS {
			continue // done
		}
		if ns.String() != rec.NS {
			mode, err := r.snapshotMode(ctx, ns)
			if err != nil {
				return err
			}
			rec.NS, rec.Mode, rec.After = ns.String(), mode, nil
			rec.From, _, _ = r.c.partitionRange()
		}
		shardKey, err := r.shardKeyOf(ctx, ns)
		if err != nil {
			return err
		}
		for {
			if r.snapGen() != gen {
				return errSnapshotReplaced
			}
			if reqs != nil && rec.Reason == SnapshotForRequest && time.Since(lastPoll) >= cfg.snapshotPoll {
				lastPoll = time.Now()
				if req, err := reqs.SnapshotRequest(ctx, cfg.name); err == nil && (req.ID != rec.Request || req.Cancelled) {
					if req.ID == rec.Request {
						rec.Cancelled = true
						r.c.log.Info("snapshot cancelled", "snapshot", rec.ID, "done", rec.Done)
					} else {
						r.c.log.Info("snapshot replaced by a newer request", "snapshot", rec.ID, "request", req.ID)
						rec.Cancelled = true
					}
					rec.Finished = time.Now()
					if err := r.saveSnapshot(ctx, rec, gen); err != nil {
						return err
					}
					r.showSnapshot(rec)
					return nil
				}
			}
			if err := r.throttle(ctx, rec); err != nil {
				return err
			}
			n, last, err := r.deliverChunk(ctx, gen, ns, rec, shardKey)
			if err != nil {
				return err
			}
			rec.Done += int64(n)
			rec.Chunks++
			if len(rec.Filter) > 0 && len(namespaces) == 1 && !last {
				rec.Total = r.extrapolate(rec)
			}
			rec.Retries, rec.Failures, rec.Error = 0, 0, ""
			r.snap.upDone += int64(n)
			rec.Rate = r.upRate(rec)
			if err := r.saveSnapshot(ctx, rec, gen); err != nil {
				return err
			}
			r.showSnapshot(rec)
			if last {
				break
			}
		}
	}
	if rec.Sweep && cfg.sweeper != nil {
		if err := cfg.sweeper(ctx, rec.Since); err != nil {
			return fmt.Errorf("ferry: snapshot sweep: %w", err)
		}
	}
	rec.Finished = time.Now()
	if len(rec.Filter) > 0 {
		rec.Total = rec.Done // extrapolated until now
	}
	if err := r.saveSnapshot(ctx, rec, gen); err != nil {
		return err
	}
	r.showSnapshot(rec)
	r.c.log.Info("snapshot finished", "snapshot", rec.ID, "documents", rec.Done, "chunks", rec.Chunks,
		"took", time.Since(rec.Started).Round(time.Millisecond))
	return nil
}

// deliverChunk reads one chunk at the reader's position and splices it
// into the stream there, then waits until every document of it is
// finished. It returns how many it delivered and whether the collection
// has no more; rec's position moves past the chunk.
func (r *runner) deliverChunk(ctx context.Context, gen int64, ns Namespace, rec *snapshotRecord, shardKey bson.Raw) (int, bool, error) {
	s := newSplice(gen)
	select {
	case r.snap.ask <- s:
	case <-ctx.Done():
		return 0, false, ctx.Err()
	}
	select {
	case <-s.atSet:
	case <-ctx.Done():
		return 0, false, ctx.Err()
	}
	if s.dropped {
		if s.at.IsZero() && s.gen == r.snapGen() {
			return 0, false, errSpliceNotReady
		}
		return 0, false, errSnapshotReplaced
	}
	c, err := r.readSnapshotChunk(ctx, ns, rec, s.at)
	if err != nil {
		s.rows <- nil // the hold ends
		awaitTaken(ctx, s)
		var se mongo.ServerError
		if errors.As(err, &se) && se.HasErrorCode(mongoerr.CodeSnapshotTooOld) {
			// The reader's position is older than the server's snapshot
			// history (a stream far behind, or history only kept from
			// the first snapshot read on): try again at a later one.
			return 0, false, fmt.Errorf("ferry: snapshot: the stream's position is older than the server's snapshot history (minSnapshotHistoryWindowInSeconds): %w", err)
		}
		return 0, false, err
	}
	var wg sync.WaitGroup
	items, err := r.chunkItems(ns, rec, c, shardKey, &wg)
	if err != nil {
		s.rows <- nil
		awaitTaken(ctx, s)
		return 0, false, fmt.Errorf("ferry: snapshot: %s: %w", ns, err)
	}
	wg.Add(len(items))
	s.rows <- items
	select {
	case <-s.done:
	case <-ctx.Done():
		return 0, false, ctx.Err()
	}
	if s.dropped {
		return 0, false, errSnapshotReplaced
	}
	waitScanned(ctx, &wg)
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := r.failure(); err != nil {
		return 0, false, err
	}
	if err := r.handlerCtx.Err(); err != nil {
		return 0, false, err // abandoned at the drain: not finished
	}
	switch rec.Mode {
	case SnapshotByHashedIndex:
		rec.From = c.from
	default:
		if c.after.Type != 0 {
			rec.setAfter(c.after)
		}
	}
	return len(items), c.last, nil
}

// Snapshot rows are allocated in blocks (chunkItems): as many events, or
// items, as fit in 32 KiB, the largest size class, so that a block comes
// from the allocator's cached spans; a larger block would be a span of its
// own, returned to the OS and faulted back in chunk after chunk.
const (
	eventBlock = 32 << 10 / int(unsafe.Sizeof(Event{}))
	itemBlock  = 32 << 10 / int(unsafe.Sizeof(item{}))
)

// chunkItems makes the chunk's rows the events the lanes deliver, each
// done on wg. The events, their items and their documentKeys are
// allocated in blocks, a few allocations per chunk rather than three per
// row: they live as long as the chunk's reply, which their documents
// alias anyway.
func (r *runner) chunkItems(ns Namespace, rec *snapshotRecord, c *chunk, shardKey bson.Raw, wg *sync.WaitGroup) ([]*item, error) {
	cfg := &r.c.cfg
	seed := append([]byte(rec.ID+"\x00"), byte(c.at.T>>24), byte(c.at.T>>16), byte(c.at.T>>8), byte(c.at.T),
		byte(c.at.I>>24), byte(c.at.I>>16), byte(c.at.I>>8), byte(c.at.I))
	var evs []Event
	var its []item
	items := make([]*item, len(c.rows))
	var keys []byte // the {_id} documentKeys, back to back
	for i, doc := range c.rows {
		if len(evs) == 0 {
			evs = make([]Event, min(eventBlock, len(c.rows)-i))
		}
		if len(its) == 0 {
			its = make([]item, min(itemBlock, len(c.rows)-i))
		}
		var key bson.Raw
		if shardKey == nil {
			id, err := doc.LookupErr("_id")
			if err != nil {
				return nil, fmt.Errorf("document has no _id: %w", err)
			}
			if n := idKeySize(id); cap(keys)-len(keys) < n {
				keys = make([]byte, 0, max(n, min(32<<10, 64*(len(c.rows)-i))))
			}
			keys, key = appendIDKey(keys, id)
		} else {
			var err error
			if key, err = backfillKey(doc, shardKey); err != nil {
				return nil, err
			}
		}
		ev := &evs[0]
		evs = evs[1:]
		ev.initBackfill(ns, doc, key, seed, cfg.partition, cfg.epoch)
		ev.ClusterTime, ev.ScanStarted, ev.ScanMarker = c.at, rec.Since, c.at
		it := &its[0]
		its = its[1:]
		*it = item{ev: ev, size: int64(len(doc)), wg: wg}
		items[i] = it
	}
	return items, nil
}

// awaitTaken waits until the reader took the chunk's rows (or ctx ends).
func awaitTaken(ctx context.Context, s *splice) {
	select {
	case <-s.done:
	case <-ctx.Done():
	}
}

// throttle waits until reading another chunk keeps the snapshot within
// SnapshotMaxRate.
func (r *runner) throttle(ctx context.Context, rec *snapshotRecord) error {
	rate := r.c.cfg.snapshotRate
	if rate <= 0 || r.snap.upDone == 0 {
		return nil
	}
	due := r.snap.upSince.Add(time.Duration(float64(r.snap.upDone) / rate * float64(time.Second)))
	if d := time.Until(due); d > 0 && !backoff.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// estimate is the partition's share of the documents in scope (of those
// matching the filter, when there is one): the collections' estimated
// counts divided by the partition count.
// extrapolate estimates a filtered snapshot's total from what its chunks
// found so far over the share of the partition's hashed range they
// covered (hashed-index mode, where the range is uniform in documents);
// 0 (unknown) in id order, or before 1% of the range is read.
func (r *runner) extrapolate(rec *snapshotRecord) int64 {
	lo, hi, ok := r.c.partitionRange()
	if !ok || rec.Mode != SnapshotByHashedIndex || rec.From <= lo {
		return 0
	}
	covered := float64(uint64(rec.From)-uint64(lo)) / (float64(uint64(hi)-uint64(lo)) + 1)
	if covered < 0.01 || covered > 1 {
		return 0
	}
	return max(rec.Done, int64(float64(rec.Done)/covered+0.5))
}

func (r *runner) estimate(ctx context.Context, namespaces []Namespace, rec *snapshotRecord) int64 {
	var total int64
	for _, ns := range namespaces {
		coll := r.c.client.Database(ns.DB).Collection(ns.Coll)
		var n int64
		var err error
		if len(rec.Filter) > 0 {
			// Counting the filter would have every partition examine the
			// whole collection (N reads for an estimate): a filtered
			// snapshot's total is extrapolated from its chunks instead
			// (extrapolate), and unknown until then.
			return 0
		}
		n, err = coll.EstimatedDocumentCount(ctx)
		if err != nil {
			return 0
		}
		total += n
	}
	return (total + int64(r.c.cfg.partitions) - 1) / int64(r.c.cfg.partitions)
}

// The reader's side of a splice.

// takeSplice starts the hold of s at the reader's position.
func (r *runner) takeSplice(s *splice) {
	if s.gen != r.snapGen() {
		s.dropped = true
		close(s.atSet)
		close(s.done)
		return
	}
	s.at = r.readTime()
	if s.at.IsZero() {
		s.dropped = true
		close(s.atSet)
		close(s.done)
		return
	}
	r.snap.hold = s
	close(s.atSet)
}

// readTime is the cluster time of the reader's position (readAt).
func (r *runner) readTime() bson.Timestamp {
	if r.readAt == nil {
		return bson.Timestamp{}
	}
	tok, err := resumetoken.Parse(r.readAt)
	if err != nil {
		return bson.Timestamp{}
	}
	t := tok.ClusterTime
	if tok.TokenType == resumetoken.TypeHighWaterMark {
		// A high-water mark at t comes before the events at t: the
		// position is the state after every event before t, one tick
		// earlier (a fresh stream's first mark is the last write + 1).
		switch {
		case t.I > 0:
			t.I--
		case t.T > 0:
			t = bson.Timestamp{T: t.T - 1, I: 1<<32 - 1}
		}
	}
	return t
}

// holdsBefore reports whether an event at t must wait for the chunk in
// flight (it is after the chunk's time).
func (r *runner) holdsBefore(t bson.Timestamp) bool {
	h := r.snap.hold
	return h != nil && t.After(h.at)
}

// awaitSplice waits for the held chunk's rows and dispatches them.
func (r *runner) awaitSplice(ctx context.Context) error {
	h := r.snap.hold
	select {
	case rows := <-h.rows:
		r.spliceRows(h, rows)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// spliceRows dispatches a chunk's rows where the reader stands: each
// lane's share in one send, in the chunk's order.
func (r *runner) spliceRows(h *splice, rows []*item) {
	r.snap.hold = nil
	if len(rows) > 0 {
		heads, tails := make([]*item, len(r.lanes)), make([]*item, len(r.lanes))
		for _, it := range rows {
			l := r.laneOf(it.ev)
			if tails[l] == nil {
				heads[l] = it
			} else {
				tails[l].next = it
			}
			tails[l] = it
		}
		for l, head := range heads {
			if head != nil {
				r.lanes[l] <- head
			}
		}
	}
	close(h.done)
}

// dropSplice lets the hold go without dispatching (the reader's position
// jumped); its rows are abandoned to their chunk.
func (r *runner) dropSplice() {
	h := r.snap.hold
	if h == nil {
		return
	}
	r.snap.hold = nil
	h.dropped = true
	go func() {
		if rows := <-h.rows; rows != nil {
			for _, it := range rows {
				it.wg.Done()
			}
		}
		close(h.done)
	}()
}
