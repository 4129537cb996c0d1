package ferry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/hashkey"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// backfill rescans the source and hands every document in scope (and in
// this partition) to the handler as a "backfill" event, then returns the
// position to stream from: the start marker taken before the scan, so every
// change made during the scan is streamed afterwards. A handler that
// upserts converges on the source; the sweeper (if any) then removes what
// the scan did not touch.
//
// The checkpoint says needs-backfill until the scan has finished, so a
// crash during the scan repeats it.
//
// With a sweeper (a sink that can tell a scanned document from a newer
// streamed change, such as the mongodb projection), the scan runs while
// the stream is applied from the marker: see startBackfill.
func (r *runner) backfill(ctx context.Context) (position, error) {
	cfg := &r.c.cfg
	r.backfillStarted = time.Now()
	if cfg.sweeper != nil {
		return r.startBackfill(ctx)
	}
	r.mark(context.WithoutCancel(ctx), checkpoint.StateNeedsBackfill, "backfill in progress")
	// The start marker: a fresh stream's first postBatchResumeToken, and the
	// server's time for the sweeper.
	cs, err := r.open(ctx, position{})
	if err != nil {
		return position{}, fmt.Errorf("ferry: backfill: open the start marker: %w", err)
	}
	marker := cs.ResumeToken()
	cs.Close(context.WithoutCancel(ctx))
	if marker == nil {
		return position{}, fmt.Errorf("ferry: backfill: the server returned no resume token for the start marker")
	}
	since, err := r.serverTime(ctx)
	if err != nil {
		return position{}, err
	}
	namespaces, err := r.scopeNamespaces(ctx)
	if err != nil {
		return position{}, err
	}
	r.c.log.Info("backfill started", "namespaces", len(namespaces))
	var wg sync.WaitGroup
	var scanned int
	for _, ns := range namespaces {
		n, err := r.scanNamespace(ctx, ns, marker, &wg)
		scanned += n
		if err != nil {
			waitScanned(ctx, &wg)
			return position{}, err
		}
	}
	waitScanned(ctx, &wg)
	if err := r.failure(); err != nil {
		return position{}, err
	}
	if ctx.Err() != nil {
		return position{}, ctx.Err()
	}
	if err := r.handlerCtx.Err(); err != nil {
		// Events were abandoned at the drain deadline: the scan is not
		// complete.
		return position{}, err
	}
	if cfg.sweeper != nil {
		if err := cfg.sweeper(ctx, since); err != nil {
			return position{}, fmt.Errorf("ferry: backfill sweep: %w", err)
		}
	}
	r.saveMu.Lock()
	next := r.cp
	next.Token, next.State, next.Note = marker, checkpoint.StateRunning, ""
	err = r.save(context.WithoutCancel(ctx), next, false)
	r.track.reset()
	r.saveMu.Unlock()
	if err != nil {
		return position{}, err
	}
	r.lastMarker = marker
	r.c.log.Info("backfill finished", "documents", scanned)
	return position{resumeAfter: marker}, nil
}

func (r *runner) serverTime(ctx context.Context) (time.Time, error) {
	var hello struct {
		LocalTime time.Time `bson:"localTime"`
	}
	if err := r.c.client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return time.Time{}, fmt.Errorf("ferry: backfill: read the server's time: %w", err)
	}
	return hello.LocalTime, nil
}

// scopeNamespaces lists the collections the stream watches.
func (r *runner) scopeNamespaces(ctx context.Context) ([]Namespace, error) {
	scope := r.c.cfg.scope
	if scope.Coll != "" {
		return []Namespace{{DB: scope.DB, Coll: scope.Coll}}, nil
	}
	dbs := []string{scope.DB}
	if scope.DB == "" {
		names, err := r.c.client.ListDatabaseNames(ctx, bson.D{})
		if err != nil {
			return nil, fmt.Errorf("ferry: backfill: list databases: %w", err)
		}
		dbs = dbs[:0]
		for _, n := range names {
			switch n {
			case "admin", "local", "config":
				continue
			}
			dbs = append(dbs, n)
		}
	}
	var out []Namespace
	for _, db := range dbs {
		names, err := r.c.client.Database(db).ListCollectionNames(ctx, bson.D{{Key: "type", Value: "collection"}})
		if err != nil {
			return nil, fmt.Errorf("ferry: backfill: list collections of %s: %w", db, err)
		}
		for _, n := range names {
			if len(n) >= 7 && n[:7] == "system." {
				continue
			}
			out = append(out, Namespace{DB: db, Coll: n})
		}
	}
	return out, nil
}

// startBackfill is the backfill of a consumer with a sweeper: it takes the
// start marker and starts the scan in the background, and returns the
// marker as the position to stream from at once, so the stream is applied
// from the marker while the scan runs (a watermarked snapshot, as Debezium
// and Redpanda Connect do). The oplog then only has to hold the marker
// for as long as the open stream takes to read past it, not for the whole
// scan: a scan whose own writes (a state store sharing the source's
// oplog) pushed the marker off the oplog used to restart for ever.
//
// The marker is the first postBatchResumeToken of the stream the read
// loop goes on consuming (r.opened): nothing stands between taking the
// marker and reading from it, neither closing that stream and opening
// another at the marker nor the server round trips the scan needs first
// (its server time, its collections), which the scan's goroutine makes.
// Any of them answered slowly let a busy oplog roll past the marker before
// the stream read from it, and the backfill never ended.
//
// Per document, the sink sees the scanned document and the streamed
// changes in any order; the backfill events carry ScanStarted and
// ScanMarker so that the sink keeps a streamed change's result over an
// older scanned copy. The checkpoint stays needs-backfill (no checkpoint is
// written) until the scan and its sweep have finished; then the position
// the stream reached is written and the partition is running. A crash or
// a stop before that repeats the backfill.
func (r *runner) startBackfill(ctx context.Context) (position, error) {
	cfg := &r.c.cfg
	r.mark(context.WithoutCancel(ctx), checkpoint.StateNeedsBackfill, "backfill in progress")
	cs, err := r.open(ctx, position{})
	if err != nil {
		return position{}, fmt.Errorf("ferry: backfill: open the start marker: %w", err)
	}
	marker := cs.ResumeToken()
	if marker == nil {
		cs.Close(context.WithoutCancel(ctx))
		return position{}, fmt.Errorf("ferry: backfill: the server returned no resume token for the start marker")
	}
	var markerTime bson.Timestamp
	if tok, err := resumetoken.Parse(marker); err == nil {
		markerTime = tok.ClusterTime
	}
	// Streamed events are tracked from the marker on.
	r.track.reset()
	r.track.setIdle(marker)
	r.scanning.Store(true)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.stopScan = func() { cancel(); <-done }
	go func() {
		defer close(done)
		// The sweep's time is the server's, read after the marker: a
		// target document not written since is not in the source.
		since, err := r.serverTime(sctx)
		if err != nil {
			if sctx.Err() == nil {
				r.fail(err)
			}
			return
		}
		namespaces, err := r.scopeNamespaces(sctx)
		if err != nil {
			if sctx.Err() == nil {
				r.fail(err)
			}
			return
		}
		r.c.log.Info("backfill started", "namespaces", len(namespaces), "streaming_meanwhile", true)
		var wg sync.WaitGroup
		var scanned int
		scan := &scanMark{since: since, marker: markerTime}
		for _, ns := range namespaces {
			n, err := r.scanNamespace(sctx, ns, marker, &wg, scan)
			scanned += n
			if err != nil {
				waitScanned(sctx, &wg)
				if sctx.Err() == nil {
					r.fail(err)
				}
				return
			}
		}
		waitScanned(sctx, &wg)
		if sctx.Err() != nil || r.failure() != nil || r.handlerCtx.Err() != nil {
			return // stopped, failed, or events abandoned: not complete
		}
		if err := cfg.sweeper(sctx, since); err != nil {
			if sctx.Err() == nil {
				r.fail(fmt.Errorf("ferry: backfill sweep: %w", err))
			}
			return
		}
		r.scanning.Store(false)
		r.c.log.Info("backfill finished", "documents", scanned)
		select {
		case r.kick <- struct{}{}: // write the position the stream reached
		default:
		}
	}()
	r.opened = cs
	return position{resumeAfter: marker}, nil
}

// scanMark is what the backfill events of a concurrent scan carry.
type scanMark struct {
	since  time.Time
	marker bson.Timestamp
}

// scanNamespace hands the documents of one collection to the lanes.
func (r *runner) scanNamespace(ctx context.Context, ns Namespace, marker bson.Raw, wg *sync.WaitGroup, scan ...*scanMark) (int, error) {
	cfg := &r.c.cfg
	cur, err := r.c.client.Database(ns.DB).Collection(ns.Coll).Find(ctx, bson.D{},
		options.Find().SetBatchSize(cfg.backfillBatch).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return 0, fmt.Errorf("ferry: backfill: scan %s: %w", ns, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	shardKey := r.shardKeyOf(ctx, ns)
	n := 0
	// batch follows the scan's batches for HookRead (tracing).
	batch := newReadBatch(r.c.hooks, cfg.name, cfg.partition, true)
	defer batch.end()
	for {
		if batch.open && cur.RemainingBatchLength() == 0 {
			batch.end() // every document of the server's batch was handed on
		}
		var readStart time.Time
		if batch.enabled && !batch.open {
			readStart = time.Now()
		}
		if !cur.Next(ctx) {
			break
		}
		batch.begin(readStart)
		doc := make(bson.Raw, len(cur.Current))
		copy(doc, cur.Current)
		id := doc.Lookup("_id")
		if cfg.partitions > 1 {
			h, err := hashkey.HashRaw(id)
			if err != nil {
				return n, fmt.Errorf("ferry: backfill: hash _id in %s: %w", ns, err)
			}
			if !r.c.partitionOf(h) {
				continue
			}
		}
		ev, err := newBackfillEvent(ns, doc, marker, cfg.partition, cfg.epoch, shardKey)
		if err != nil {
			return n, fmt.Errorf("ferry: backfill: %s: %w", ns, err)
		}
		if len(scan) > 0 {
			ev.ScanStarted, ev.ScanMarker = scan[0].since, scan[0].marker
		}
		size := int64(len(doc))
		if err := r.win.acquire(ctx, size); err != nil {
			return n, err
		}
		wg.Add(1)
		batch.add(ev, size)
		r.dispatch(&item{ev: ev, size: size, wg: wg})
		n++
	}
	if err := cur.Err(); err != nil {
		return n, fmt.Errorf("ferry: backfill: scan %s: %w", ns, err)
	}
	return n, nil
}

// shardKeyOf is the key pattern of collection ns when it is sharded
// (config.collections, read through mongos), so that backfill events carry
// the documentKey its changes carry; nil on a replica set, for an
// unsharded collection, or when the config database cannot be read (then
// a warning: the backfill's documentKeys are {_id} only).
func (r *runner) shardKeyOf(ctx context.Context, ns Namespace) bson.Raw {
	var coll struct {
		Key bson.Raw `bson:"key"`
	}
	err := r.c.client.Database("config").Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns.String()}}).Decode(&coll)
	switch {
	case err == nil:
		return coll.Key
	case !errors.Is(err, mongo.ErrNoDocuments) && ctx.Err() == nil:
		r.c.log.Warn("backfill: cannot read the shard key of the collection from config.collections; "+
			"backfill events carry documentKey {_id} only", "ns", ns.String(), "err", err)
	}
	return nil
}

// waitScanned waits until every event the scan handed to the lanes is
// finished or abandoned, or until ctx ends (a stop, or the partition
// failing): the lanes then drain, with their deadline, only after the read
// (and so this scan) has returned; the events still in them let go of wg
// as they finish or are abandoned.
func waitScanned(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
