package mongotest

import (
	"crypto/rand"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// engine holds all server state behind one lock: databases, the oplog and
// cursors. One lock keeps every command atomic and every oplog entry in
// cluster-time order, the two properties change streams depend on.
type engine struct {
	cfg *config
	// users are the users of a server with authorization on, by
	// "db.name"; nil: authorization off (auth.go).
	users map[string]*authUser

	mu        sync.Mutex
	clockSkew time.Duration
	lastTS    bson.Timestamp
	dbs       map[string]*database
	oplog     oplog
	cursors   map[int64]*cursor
	nextCur   int64
	params    serverParams
	fail      failPoints
	sessions  map[string]*session
	// Commands waiting for a session to be checked in, and for a
	// transaction to end (tests wait on them).
	sessionWaits, txnWaits int
	// sessionsReapAt is when idle sessions are next forgotten.
	sessionsReapAt time.Time
	// activeTxns counts open transactions; while it is non-zero, records
	// keep the versions their snapshots may read.
	activeTxns int
	// curTxn is the transaction whose statement is running (DDL inside
	// transactions).
	curTxn *txn
	// snapHist keeps record versions for snapshot reads.
	snapHist snapshotHistory
	// ownsAt, on a shard of a sharded cluster, reports whether the shard
	// owned a document of a sharded collection at a cluster time (its
	// ownership filter, sharding_history.go); nil elsewhere.
	ownsAt func(c *collection, doc bson.D, at bson.Timestamp) bool
	// metrics are serverStatus' document and queryExecutor counters.
	metrics serverMetrics
	closed  bool
	// idScanOnly turns the _id index path off (benchmarks compare it
	// with the scan it replaces).
	idScanOnly bool
	// streamWindow is how many oplog entries a change-stream getMore
	// copies under the lock at a time.
	streamWindow int
	processID    bson.ObjectID
	startedAt    time.Time

	// newEntry is closed and replaced whenever the oplog grows, waking
	// change-stream getMores that wait for events.
	newEntry chan struct{}
	ttlKick  chan struct{}

	// router, on a mongos, routes commands to the shards (mongos.go).
	router *router
	// fromMigrate, on a shard, marks the oplog entries written while it
	// is set as a chunk migration's (sharded.go).
	fromMigrate bool
}

type serverParams struct {
	ttlMonitorSleep time.Duration
	ttlEnabled      bool
	noopInterval    time.Duration
	txnLifetime     time.Duration
	snapshotWindow  time.Duration
}

func newEngine(cfg *config) *engine {
	e := &engine{
		cfg:          cfg,
		users:        newUsers(cfg.users),
		dbs:          make(map[string]*database),
		cursors:      make(map[int64]*cursor),
		sessions:     make(map[string]*session),
		newEntry:     make(chan struct{}),
		ttlKick:      make(chan struct{}, 1),
		processID:    bson.NewObjectID(),
		streamWindow: defaultStreamWindow,
		params: serverParams{
			ttlMonitorSleep: cfg.ttlInterval,
			ttlEnabled:      true,
			noopInterval:    cfg.noopInterval,
			txnLifetime:     defaultTransactionLifetime,
			snapshotWindow:  defaultSnapshotWindow,
		},
	}
	e.startedAt = e.now()
	e.mu.Lock()
	// A replica set's oplog starts with the "initiating set" no-op.
	e.appendOplog(&oplogEntry{op: opNoop})
	e.mu.Unlock()
	return e
}

func (e *engine) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	close(e.newEntry)
	e.newEntry = make(chan struct{})
}

// now returns the server's wall clock, shifted by AdvanceClock.
func (e *engine) now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nowLocked()
}

func (e *engine) nowLocked() time.Time { return e.cfg.now().Add(e.clockSkew) }

func (e *engine) advanceClock(d time.Duration) {
	e.mu.Lock()
	e.clockSkew += d
	e.mu.Unlock()
	select {
	case e.ttlKick <- struct{}{}:
	default:
	}
}

func (e *engine) noopInterval() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.params.noopInterval
}

func (e *engine) ttlInterval() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.params.ttlEnabled {
		return 0
	}
	return e.params.ttlMonitorSleep
}

// nextTimestamp returns a cluster time strictly greater than every earlier
// one: the wall-clock second, with the increment counting writes within it.
func (e *engine) nextTimestamp(now time.Time) bson.Timestamp {
	if k := e.cfg.sharding.clock; k != nil { // a member of a sharded cluster
		e.lastTS = k.next(now)
		return e.lastTS
	}
	secs := uint32(now.Unix())
	if secs <= e.lastTS.T {
		e.lastTS = bson.Timestamp{T: e.lastTS.T, I: e.lastTS.I + 1}
	} else {
		e.lastTS = bson.Timestamp{T: secs, I: 1}
	}
	return e.lastTS
}

// clusterTime is the newest cluster time (the last oplog entry's).
func (e *engine) clusterTime() bson.Timestamp {
	if k := e.cfg.sharding.clock; k != nil { // the cluster's, as gossiped
		return k.current()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastTS
}

func (e *engine) writeNoopIfIdle(iv time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	last := e.oplog.last()
	if last != nil && e.nowLocked().Sub(last.wall.Time()) < iv {
		return
	}
	e.appendOplog(&oplogEntry{op: opNoop})
}

func newUUID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = (u[6] & 0x0f) | 0x40
	u[8] = (u[8] & 0x3f) | 0x80
	return u
}
