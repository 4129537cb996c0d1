package mongotest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Chunk migrations, splits, the balancer, movePrimary and removeShard.
//
// A migration copies the chunk's documents to the recipient shard as
// inserts marked fromMigrate, points the chunk at the recipient, then
// deletes them on the donor, also fromMigrate: no change stream shows
// them (through the mongos, where showMigrationEvents is refused, or on a
// shard without it). The collection's commands wait for the migration to
// finish (its critical section), and a migration waits for none: it is
// refused (ConflictingOperationInProgress, 117) while the donor has an
// open transaction that wrote to the collection (txnOn), which might write
// into the chunk; transactions on other collections do not matter. A
// document whose _id the recipient already holds under a key outside the
// chunk fails the migration (OperationFailed, E11000), as the recipient's
// _id index fails a real one.

// codeConflictingOperationInProgress is error_codes.yml's.
const codeConflictingOperationInProgress = 117

// MoveChunk moves the chunk of the sharded collection ns holding the
// shard key of find (a document with the key's fields, unhashed) to the
// shard to ("shard1", ...), as the moveChunk command does.
func (s *ShardedServer) MoveChunk(ns string, find bson.D, to string) error {
	m := s.rt.sharded(ns)
	if m == nil {
		return fmt.Errorf("mongotest: MoveChunk: %s is not sharded", ns)
	}
	s.rt.mu.Lock()
	c := m.chunkFor(m.keyOf(find))
	dst := s.rt.shardByID(to)
	s.rt.mu.Unlock()
	if dst == nil {
		return fmt.Errorf("mongotest: MoveChunk: no shard %q", to)
	}
	if err := s.rt.moveChunk(context.Background(), m, c, dst); err != nil {
		return err
	}
	return nil
}

// SplitChunk splits the chunk of the sharded collection ns holding the
// shard key of middle at that key, as the split command with middle does.
func (s *ShardedServer) SplitChunk(ns string, middle bson.D) error {
	m := s.rt.sharded(ns)
	if m == nil {
		return fmt.Errorf("mongotest: SplitChunk: %s is not sharded", ns)
	}
	if err := s.rt.splitAt(context.Background(), m, m.keyOf(middle)); err != nil {
		return err
	}
	return nil
}

// RemoveShard removes a shard from the cluster, as removeShard does once
// it has drained: its chunks move to the other shards, the databases it is
// primary for move (movePrimary), then config.shards forgets it. A change
// stream opened or resumed through the mongos from before the removal
// then fails with ChangeStreamHistoryLost (286). The shard's server keeps
// running, out of the cluster.
func (s *ShardedServer) RemoveShard(id string) error {
	return s.rt.removeShard(context.Background(), id)
}

// lockForCommand takes a sharded collection's migration lock for
// reading, for a command on it; it returns the unlock.
func (rt *router) lockForCommand(m *collMeta) func() {
	m.mig.RLock()
	return m.mig.RUnlock
}

// moveChunk migrates one chunk.
func (rt *router) moveChunk(ctx context.Context, m *collMeta, c *chunk, dst *shard) error {
	m.mig.Lock()
	defer m.mig.Unlock()
	rt.mu.Lock()
	src := c.shard
	current := false
	for _, x := range m.chunks {
		current = current || x == c
	}
	rt.mu.Unlock()
	if !current {
		return errorf(codeConflictingOperationInProgress, "the chunk of %s changed while it was being moved; retry", m.ns())
	}
	if src == dst {
		return nil
	}
	de, re := src.srv.eng, dst.srv.eng
	de.mu.Lock()
	if de.txnOn(m.db, m.coll) {
		de.mu.Unlock()
		return errorf(codeConflictingOperationInProgress, "cannot move a chunk of %s while transactions on it are open on the donor shard %s; retry when they end", m.ns(), src.id)
	}
	var docs []bson.D
	if coll := de.coll(m.db, m.coll); coll != nil {
		for _, rec := range coll.all() {
			k := m.keyOf(rec.doc)
			if compareKeys(k, c.min) >= 0 && compareKeys(k, c.max) < 0 {
				docs = append(docs, rec.doc)
			}
		}
	}
	de.mu.Unlock()

	// The recipient receives the documents (fromMigrate inserts). _id is
	// unique per shard only: a document whose _id the recipient already
	// holds for a key outside the chunk (another document, which the
	// recipient owns) fails the migration before anything moves, as the
	// recipient's _id index fails a real one; one inside the chunk is an
	// orphan of an earlier migration, replaced.
	re.mu.Lock()
	if rc := re.coll(m.db, m.coll); rc != nil {
		for _, d := range docs {
			if rec := rc.byID[keyOf(d[0].Value)]; rec != nil {
				if k := m.keyOf(rec.doc); compareKeys(k, c.min) < 0 || compareKeys(k, c.max) >= 0 {
					re.mu.Unlock()
					return errorf(mongoerr.CodeOperationFailed, "Data transfer error: migration of %s to %s failed: E11000 duplicate key error collection: %s index: _id_ dup key: { _id: %s }",
						m.ns(), dst.id, m.ns(), shortValue(d[0].Value))
				}
			}
		}
	}
	rc := re.ensureShardedCollLocked(m.db, m.coll, m.uuid, m.fields, m.options)
	re.fromMigrate = true
	for _, d := range docs {
		if rec := rc.byID[keyOf(d[0].Value)]; rec != nil {
			re.deleteRecord(rc, rec) // an orphan of the chunk's range
		}
		_ = re.insertDoc(rc, d, nil)
	}
	re.fromMigrate = false
	re.mu.Unlock()

	// The migration commits at a cluster time of its own, after the
	// recipient's copies and before the donor's deletes: reads at an
	// earlier time are the donor's, at a later one the recipient's
	// (sharding_history.go).
	commit := rt.cl.clock.next(src.srv.Now())
	rt.mu.Lock()
	c.shard = dst
	m.version++
	rt.notePlacementLocked(m, commit)
	rt.mu.Unlock()

	// The donor deletes them (fromMigrate deletes: the range deleter).
	de.mu.Lock()
	de.fromMigrate = true
	if coll := de.coll(m.db, m.coll); coll != nil {
		for _, d := range docs {
			if rec := coll.byIDValue(d[0].Value); rec != nil {
				de.deleteRecord(coll, rec)
			}
		}
	}
	de.fromMigrate = false
	de.mu.Unlock()
	rt.writeCollectionConfig(ctx, m)
	return nil
}

// splitAt splits the chunk holding key at key (a bound already: nothing
// to do).
func (rt *router) splitAt(ctx context.Context, m *collMeta, key []any) error {
	m.mig.Lock()
	rt.mu.Lock()
	var i int
	c := m.chunkFor(key)
	for i = range m.chunks {
		if m.chunks[i] == c {
			break
		}
	}
	if compareKeys(c.min, key) == 0 {
		rt.mu.Unlock()
		m.mig.Unlock()
		return nil
	}
	upper := &chunk{id: bson.NewObjectID(), min: key, max: c.max, shard: c.shard}
	c.max = key
	m.chunks = append(m.chunks[:i+1], append([]*chunk{upper}, m.chunks[i+1:]...)...)
	m.version++
	rt.mu.Unlock()
	m.mig.Unlock()
	rt.writeCollectionConfig(ctx, m)
	return nil
}

// routerMoveChunk is the moveChunk command: {moveChunk: ns, find: {...}
// | bounds: [min, max], to: shard}.
func routerMoveChunk(rt *router, r *request) (bson.D, bool, error) {
	m, err := rt.shardedArg(r)
	if err != nil {
		return nil, false, err
	}
	to, _ := lookupD(r.cmd, "to").(string)
	rt.mu.Lock()
	dst := rt.shardByID(to)
	rt.mu.Unlock()
	if dst == nil {
		return nil, false, errorf(codeShardNotFound, "moveChunk: no shard %q in 'to' (listShards lists them)", to)
	}
	c, err := rt.chunkArg(r, m)
	if err != nil {
		return nil, false, err
	}
	if err := rt.moveChunk(r.ctx, m, c, dst); err != nil {
		return nil, false, err
	}
	return bson.D{{Key: "millis", Value: int32(0)}}, false, nil
}

// routerSplit is the split command: {split: ns, middle: {...}}.
func routerSplit(rt *router, r *request) (bson.D, bool, error) {
	m, err := rt.shardedArg(r)
	if err != nil {
		return nil, false, err
	}
	middle, ok := lookupD(r.cmd, "middle").(bson.D)
	if !ok {
		return nil, false, errorf(mongoerr.CodeFailedToParse, "split: give 'middle', the shard key value to split at (e.g. {x: 10}; for a hashed key, the hash as a NumberLong)")
	}
	key := make([]any, len(m.fields))
	for i, f := range m.fields {
		v, ok := lookupTop(middle, f)
		if !ok {
			return nil, false, errorf(mongoerr.CodeBadValue, "split: 'middle' lacks the shard key field %q", f)
		}
		key[i] = v
	}
	if err := rt.splitAt(r.ctx, m, key); err != nil {
		return nil, false, err
	}
	return bson.D{}, false, nil
}

func (rt *router) shardedArg(r *request) (*collMeta, error) {
	ns, _ := r.cmd[0].Value.(string)
	m := rt.sharded(ns)
	if m == nil {
		return nil, errorf(mongoerr.CodeNamespaceNotFound, "%s: %q is not a sharded collection", r.name, ns)
	}
	return m, nil
}

// chunkArg finds the chunk a command names by find (a document with the
// shard key, unhashed) or bounds ([min, max], a chunk's exactly).
func (rt *router) chunkArg(r *request, m *collMeta) (*chunk, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if find, ok := lookupD(r.cmd, "find").(bson.D); ok {
		return m.chunkFor(m.keyOf(find)), nil
	}
	if b, ok := lookupD(r.cmd, "bounds").(bson.A); ok && len(b) == 2 {
		lo, _ := b[0].(bson.D)
		for _, c := range m.chunks {
			if mqlEqualDoc(m.boundDoc(c.min), lo) {
				return c, nil
			}
		}
		return nil, errorf(mongoerr.CodeBadValue, "%s: no chunk of %s starts at bounds[0]; config.chunks lists them", r.name, m.ns())
	}
	return nil, errorf(mongoerr.CodeFailedToParse, "%s: give 'find' (a document with the shard key) or 'bounds' ([min, max] of a chunk)", r.name)
}

func mqlEqualDoc(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || compareKeys([]any{a[i].Value}, []any{b[i].Value}) != 0 {
			return false
		}
	}
	return true
}

// balancerState is the cluster's balancer: whether it runs, is stopped
// (balancerStop), and its rounds. A round holds mu, so balancerStop,
// which takes it, returns once the round in progress has ended, as a
// real balancerStop waits for the current round.
type balancerState struct {
	mu       sync.Mutex
	started  bool // a balancer goroutine runs (BalancerInterval, or balancerStart)
	stopped  bool // balancerStop: the rounds are skipped
	inRound  bool
	rounds   int64
	interval time.Duration
}

// defaultBalancerInterval is how long a real balancer sleeps between
// rounds (10 s); balancerStart on a cluster started without
// BalancerInterval runs it at that pace.
const defaultBalancerInterval = 10 * time.Second

// startBalancer runs the balancer every d (0: never).
func (rt *router) startBalancer(d time.Duration) {
	if d <= 0 {
		return
	}
	b := &rt.balancer
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return
	}
	b.started, b.interval = true, d
	b.mu.Unlock()
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-rt.ctx.Done():
				return
			case <-t.C:
				b.mu.Lock()
				if !b.stopped {
					b.inRound = true
					rt.balanceRound(rt.ctx)
					b.inRound = false
					b.rounds++
				}
				b.mu.Unlock()
			}
		}
	}()
}

// routerBalancerStart is balancerStart: the balancer runs its rounds
// again (a cluster started without BalancerInterval gets one every 10 s,
// a real balancer's pace).
func routerBalancerStart(rt *router, r *request) (bson.D, bool, error) {
	rt.balancer.mu.Lock()
	rt.balancer.stopped = false
	started := rt.balancer.started
	rt.balancer.mu.Unlock()
	if !started {
		rt.startBalancer(defaultBalancerInterval)
	}
	rt.writeBalancerSettings(r.ctx, false)
	return bson.D{}, false, nil
}

// routerBalancerStop is balancerStop: it returns once the round in
// progress, if any, has ended; no round runs until balancerStart.
func routerBalancerStop(rt *router, r *request) (bson.D, bool, error) {
	rt.balancer.mu.Lock() // waits for the round in progress
	rt.balancer.stopped = true
	rt.balancer.mu.Unlock()
	rt.writeBalancerSettings(r.ctx, true)
	return bson.D{}, false, nil
}

// routerBalancerStatus is balancerStatus: {mode: "full" | "off",
// inBalancerRound, numBalancerRounds}.
func routerBalancerStatus(rt *router, r *request) (bson.D, bool, error) {
	b := &rt.balancer
	locked := b.mu.TryLock() // a round in progress holds it
	mode, in, n := "off", !locked, int64(0)
	if locked {
		if b.started && !b.stopped {
			mode = "full"
		}
		n = b.rounds
		b.mu.Unlock()
	} else {
		mode = "full"
	}
	return bson.D{{Key: "mode", Value: mode}, {Key: "inBalancerRound", Value: in}, {Key: "numBalancerRounds", Value: n}}, false, nil
}

// writeBalancerSettings records the balancer's mode in config.settings,
// as balancerStart and balancerStop do ({_id: "balancer", mode, stopped}).
func (rt *router) writeBalancerSettings(ctx context.Context, stopped bool) {
	mode := "full"
	if stopped {
		mode = "off"
	}
	rt.configCommand(ctx, "config", bson.D{{Key: "update", Value: "settings"}, {Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: "balancer"}}},
		{Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "mode", Value: mode}, {Key: "stopped", Value: stopped}}}}},
		{Key: "upsert", Value: true}}}}})
}

// balanceRound moves, for each sharded collection, a range of documents
// from the shard holding the most of them to the one holding the fewest
// when they differ by more than one: it splits the donor's largest chunk
// at its documents' median key when need be, then moves the upper part.
func (rt *router) balanceRound(ctx context.Context) {
	rt.mu.Lock()
	var colls []*collMeta
	for _, m := range rt.colls {
		colls = append(colls, m)
	}
	live := rt.liveShards()
	rt.mu.Unlock()
	for _, m := range colls {
		if len(live) < 2 {
			return
		}
		counts := map[*shard]int{}
		keys := map[*chunk][][]any{}
		for _, sh := range live {
			sh.srv.eng.mu.Lock()
			if coll := sh.srv.eng.coll(m.db, m.coll); coll != nil {
				counts[sh] = coll.live
				rt.mu.Lock()
				for _, rec := range coll.all() {
					k := m.keyOf(rec.doc)
					c := m.chunkFor(k)
					if c.shard == sh {
						keys[c] = append(keys[c], k)
					}
				}
				rt.mu.Unlock()
			}
			sh.srv.eng.mu.Unlock()
		}
		src, dst := live[0], live[0]
		for _, sh := range live {
			if counts[sh] > counts[src] {
				src = sh
			}
			if counts[sh] < counts[dst] {
				dst = sh
			}
		}
		if counts[src]-counts[dst] <= 1 {
			continue
		}
		var big *chunk
		rt.mu.Lock() // a chunk's shard changes under rt.mu (moveChunk)
		for c, ks := range keys {
			if c.shard == src && (big == nil || len(ks) > len(keys[big])) {
				big = c
			}
		}
		rt.mu.Unlock()
		if big == nil {
			continue
		}
		ks := keys[big]
		if len(ks) >= 2 {
			sortKeys(ks)
			mid := ks[len(ks)/2]
			if compareKeys(mid, ks[0]) > 0 {
				_ = rt.splitAt(ctx, m, mid)
				rt.mu.Lock()
				big = m.chunkFor(mid)
				rt.mu.Unlock()
			}
		}
		_ = rt.moveChunk(ctx, m, big, dst)
	}
}

func sortKeys(ks [][]any) {
	slices.SortFunc(ks, compareKeys)
}

// removeShard drains a shard and removes it.
func (rt *router) removeShard(ctx context.Context, id string) error {
	rt.mu.Lock()
	sh := rt.shardByID(id)
	var others []*shard
	for _, x := range rt.liveShards() {
		if x != sh {
			others = append(others, x)
		}
	}
	var colls []*collMeta
	for _, m := range rt.colls {
		colls = append(colls, m)
	}
	var dbs []*dbMeta
	for _, d := range rt.dbs {
		if d.primary == sh {
			dbs = append(dbs, d)
		}
	}
	rt.mu.Unlock()
	if sh == nil {
		return fmt.Errorf("mongotest: RemoveShard: no shard %q in the cluster", id)
	}
	if len(others) == 0 {
		return fmt.Errorf("mongotest: RemoveShard: %s is the cluster's last shard", id)
	}
	n := 0
	for _, m := range colls {
		rt.mu.Lock()
		var mine []*chunk
		for _, c := range m.chunks {
			if c.shard == sh {
				mine = append(mine, c)
			}
		}
		rt.mu.Unlock()
		for _, c := range mine {
			if err := rt.moveChunk(ctx, m, c, others[n%len(others)]); err != nil {
				return err
			}
			n++
		}
	}
	for _, d := range dbs {
		if err := rt.movePrimary(ctx, d, others[0]); err != nil {
			return err
		}
	}
	rt.mu.Lock()
	sh.removed = true
	rt.mu.Unlock()
	reply := rt.configCommand(ctx, "config", bson.D{{Key: "delete", Value: "shards"}, {Key: "deletes", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: id}}}, {Key: "limit", Value: int32(1)}}}}})
	if err := replyError(reply); err != nil {
		return err
	}
	op, _ := lookupD(reply, "operationTime").(bson.Timestamp)
	rt.mu.Lock()
	sh.removedAt = op
	rt.mu.Unlock()
	return nil
}

// movePrimary moves a database's unsharded collections to another shard
// (creates with their UUIDs and inserts, all fromMigrate, then drops on
// the old primary, fromMigrate too) and makes it the primary.
func (rt *router) movePrimary(ctx context.Context, d *dbMeta, to *shard) error {
	rt.mu.Lock()
	from := d.primary
	rt.mu.Unlock()
	fe, te := from.srv.eng, to.srv.eng
	fe.mu.Lock()
	if fe.activeTxns > 0 {
		fe.mu.Unlock()
		return errorf(codeConflictingOperationInProgress, "cannot move the primary of %s while transactions are open on %s; retry when they end", d.name, from.id)
	}
	type collCopy struct {
		name    string
		uuid    [16]byte
		options bson.D
		docs    []bson.D
	}
	var copies []collCopy
	if db := fe.dbs[d.name]; db != nil {
		for name, c := range db.colls {
			if rt.sharded(d.name+"."+name) != nil || c.isView {
				continue
			}
			cp := collCopy{name: name, uuid: c.uuid, options: c.options}
			for _, rec := range c.all() {
				cp.docs = append(cp.docs, rec.doc)
			}
			copies = append(copies, cp)
		}
	}
	fe.mu.Unlock()
	te.mu.Lock()
	te.fromMigrate = true
	for _, cp := range copies {
		c := te.coll(d.name, cp.name)
		if c == nil {
			c = te.createColl(d.name, cp.name, cp.options)
			c.uuid = cp.uuid
			if last := te.oplog.last(); last != nil && last.op == opCreate {
				u := cp.uuid
				last.uuid = &u
			}
		}
		for _, doc := range cp.docs {
			_ = te.insertDoc(c, doc, nil)
		}
	}
	te.fromMigrate = false
	te.mu.Unlock()
	rt.mu.Lock()
	d.primary = to
	rt.mu.Unlock()
	fe.mu.Lock()
	fe.fromMigrate = true
	for _, cp := range copies {
		if c := fe.coll(d.name, cp.name); c != nil {
			fe.dropColl(c)
		}
	}
	fe.fromMigrate = false
	fe.mu.Unlock()
	rt.configCommand(ctx, "config", bson.D{{Key: "update", Value: "databases"}, {Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: d.name}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "primary", Value: to.id}}}}}}}}})
	return nil
}

// routerRemoveShard is the removeShard command: {removeShard: "shardN"};
// the shard drains at once, so the reply says state "completed".
func routerRemoveShard(rt *router, r *request) (bson.D, bool, error) {
	id, _ := r.cmd[0].Value.(string)
	if err := rt.removeShard(r.ctx, id); err != nil {
		return nil, false, errorf(codeShardNotFound, "%v", err)
	}
	return bson.D{{Key: "msg", Value: "removeshard completed successfully"}, {Key: "state", Value: "completed"}, {Key: "shard", Value: id}}, false, nil
}

// txnOn reports whether an open transaction on e has read or written
// collection db.coll: a migration of one of its chunks waits for it, as a
// real migration's critical section does (transactions on other
// collections, such as a consumer's ledger and checkpoints on the same
// shard, do not hold it up). Callers hold e.mu.
func (e *engine) txnOn(db, coll string) bool {
	c := e.coll(db, coll)
	if c == nil {
		return false
	}
	for _, sess := range e.sessions {
		t := sess.txn
		if t == nil || t.state != txnActive {
			continue
		}
		if _, ok := t.local[c]; ok {
			return true
		}
		for _, op := range t.ops {
			if op.c == c {
				return true
			}
		}
	}
	return false
}
