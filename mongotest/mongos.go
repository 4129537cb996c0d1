package mongotest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
	"github.com/ferry-io/ferry/mongotest/internal/wire"
)

// The mongos of a ShardedServer. Its Server runs an engine of its own for
// what a mongos keeps itself (fail points, cursors' ids, the cluster
// time), and a router that sends every command about data to the shards,
// through each shard engine's command path, as a real mongos sends them
// over its connections to the shards: the shards run them as they would
// for any client (sessions, transactions, retryable writes, fail points
// set on a shard), and the router merges their replies.

// router routes one mongos' commands. The cluster's routing metadata is
// shared by every mongos (clusterMeta, embedded); cursors and
// transactions are each mongos' own, as on a real cluster (a getMore sent
// to another mongos fails with CursorNotFound; another mongos knows a
// transaction only by its recoveryToken).
type router struct {
	*clusterMeta
	e *engine // the mongos' own engine

	// cursors are the mongos' cursors (guarded by mu, as all below).
	cursors map[int64]*routerCursor
	nextCur int64
	// txns are the sessions' transactions: which shards take part.
	txns map[string]*routerTxn
	// topologyVersion's processId (hello).
	processID bson.ObjectID
	// helloKick is closed (and replaced) to answer the awaitable hellos
	// waiting (kickHello).
	helloKick chan struct{}
}

// clusterMeta is what every mongos of a cluster shares: the shards and
// the routing table (config.shards, config.databases, config.collections
// and config.chunks mirror them on the config server).
type clusterMeta struct {
	cl *ShardedServer

	mu     sync.Mutex
	shards []*shard
	// dbs are the databases and their primary shards; colls the sharded
	// collections.
	dbs   map[string]*dbMeta
	colls map[string]*collMeta
	// placed is the sharded collections' placement history
	// (sharding_history.go), its lock a leaf.
	placed placementLog

	// balancer is the cluster's balancer (BalancerInterval,
	// balancerStart, balancerStop).
	balancer balancerState

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// shard is one shard of the cluster.
type shard struct {
	id      string
	srv     *Server
	removed bool
	// addedAt is the cluster time of its config.shards insert;
	// removedAt that of its removal.
	addedAt, removedAt bson.Timestamp
}

// host is the shard's "<replSetName>/<host:port>", as config.shards has it.
func (sh *shard) host() string { return sh.id + "/" + sh.srv.Addr() }

// dbMeta is a database's routing entry (config.databases).
type dbMeta struct {
	name    string
	primary *shard
}

// routerTxn is a session's transaction as the mongos sees it.
type routerTxn struct {
	number       int64
	participants []*shard
	readConcern  any // the first statement's, sent to each participant's first
}

func newClusterMeta(cl *ShardedServer) *clusterMeta {
	ctx, cancel := context.WithCancel(context.Background())
	return &clusterMeta{
		cl:     cl,
		dbs:    make(map[string]*dbMeta),
		colls:  make(map[string]*collMeta),
		ctx:    ctx,
		cancel: cancel,
	}
}

// newRouter returns a mongos' router over the cluster's metadata.
func newRouter(meta *clusterMeta) *router {
	return &router{
		clusterMeta: meta,
		cursors:     make(map[int64]*routerCursor),
		txns:        make(map[string]*routerTxn),
		processID:   bson.NewObjectID(),
		helloKick:   make(chan struct{}),
	}
}

func (m *clusterMeta) stop() {
	m.cancel()
	m.wg.Wait()
}

// addShard starts a shard and records it in config.shards.
func (rt *router) addShard(ctx context.Context) (*shard, error) {
	rt.mu.Lock()
	n := len(rt.shards)
	rt.mu.Unlock()
	cfg := rt.cl.opts
	cfg.replSetName = fmt.Sprintf("shard%d", n)
	cfg.sharding.lookup = rt.clusterMeta.lookupDocument
	srv, err := start(cfg, nil)
	if err != nil {
		return nil, err
	}
	sh := &shard{id: cfg.replSetName, srv: srv}
	meta := rt.clusterMeta
	srv.eng.ownsAt = func(c *collection, doc bson.D, at bson.Timestamp) bool {
		return meta.ownsAt(sh, c.db+"."+c.name, doc, at)
	}
	rt.mu.Lock()
	rt.shards = append(rt.shards, sh)
	rt.mu.Unlock()
	// The insert into config.shards is what change streams open through
	// the mongos notice (mongos_stream.go).
	reply := rt.configCommand(ctx, "config", bson.D{{Key: "insert", Value: "shards"}, {Key: "documents", Value: bson.A{bson.D{
		{Key: "_id", Value: sh.id}, {Key: "host", Value: sh.host()}, {Key: "state", Value: int32(1)},
		{Key: "topologyTime", Value: rt.cl.clock.current()},
	}}}})
	if err := replyError(reply); err != nil {
		return nil, err
	}
	op, _ := lookupD(reply, "operationTime").(bson.Timestamp)
	rt.mu.Lock()
	sh.addedAt = op
	rt.mu.Unlock()
	return sh, nil
}

// configCommand runs a command on the config server.
func (rt *router) configCommand(ctx context.Context, db string, cmd bson.D) bson.D {
	cmd = append(cmd, bson.E{Key: "$db", Value: db})
	return rt.cl.config.eng.run(ctx, &conn{srv: rt.cl.config}, cmd, nil)
}

// replyError returns a reply's error, nil when it is ok.
func replyError(reply bson.D) *cmdError {
	if reply == nil {
		return errorf(mongoerr.CodeHostUnreachable, "connection closed by the remote host")
	}
	if ok, _ := lookupD(reply, "ok").(float64); ok == 1 {
		return nil
	}
	code, _ := asInt64(lookupD(reply, "code"))
	msg, _ := lookupD(reply, "errmsg").(string)
	ce := &cmdError{Code: int32(code), Msg: msg}
	if labels, ok := lookupD(reply, "errorLabels").(bson.A); ok {
		ce.labelsSet = true
		for _, l := range labels {
			if s, ok := l.(string); ok {
				ce.Labels = append(ce.Labels, s)
			}
		}
	}
	for _, el := range reply {
		switch el.Key {
		case "ok", "errmsg", "code", "codeName", "errorLabels", "$clusterTime", "operationTime":
		default:
			ce.Extra = append(ce.Extra, el)
		}
	}
	return ce
}

// liveShards returns the shards in the cluster. Callers hold rt.mu.
func (rt *router) liveShards() []*shard {
	out := make([]*shard, 0, len(rt.shards))
	for _, sh := range rt.shards {
		if !sh.removed {
			out = append(out, sh)
		}
	}
	return out
}

// shardByID returns a live shard. Callers hold rt.mu.
func (rt *router) shardByID(id string) *shard {
	for _, sh := range rt.shards {
		if sh.id == id && !sh.removed {
			return sh
		}
	}
	return nil
}

// primaryShard returns the primary shard of a database, creating the
// database's entry (on the shard with the fewest databases) when create
// is set; a database that does not exist reads from the first shard.
func (rt *router) primaryShard(ctx context.Context, db string, create bool) *shard {
	rt.mu.Lock()
	if m := rt.dbs[db]; m != nil {
		rt.mu.Unlock()
		return m.primary
	}
	live := rt.liveShards()
	if !create {
		rt.mu.Unlock()
		return live[0]
	}
	count := map[*shard]int{}
	for _, m := range rt.dbs {
		count[m.primary]++
	}
	best := live[0]
	for _, sh := range live[1:] {
		if count[sh] < count[best] {
			best = sh
		}
	}
	rt.dbs[db] = &dbMeta{name: db, primary: best}
	rt.mu.Unlock()
	rt.configCommand(ctx, "config", bson.D{{Key: "insert", Value: "databases"}, {Key: "documents", Value: bson.A{bson.D{
		{Key: "_id", Value: db}, {Key: "primary", Value: best.id},
		{Key: "version", Value: bson.D{{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: uuidBytes(newUUID())}}, {Key: "timestamp", Value: rt.cl.clock.current()}, {Key: "lastMod", Value: int32(1)}}},
	}}}})
	return best
}

func uuidBytes(u [16]byte) []byte { return u[:] }

// routerCommand describes how a mongos runs one command. run returns the
// reply and whether it is final: a shard's whole reply (ok, labels,
// operationTime included), passed on as it is.
type routerCommand struct {
	run         func(rt *router, r *request) (reply bson.D, final bool, err error)
	adminOnly   bool
	testControl bool
}

var routerCommands map[string]routerCommand

func init() {
	local := func(f func(*engine, *request) (bson.D, error)) func(*router, *request) (bson.D, bool, error) {
		return func(rt *router, r *request) (bson.D, bool, error) {
			rt.e.mu.Lock()
			defer rt.e.mu.Unlock()
			reply, err := f(rt.e, r)
			return reply, false, err
		}
	}
	notOnMongos := func(rt *router, r *request) (bson.D, bool, error) {
		return nil, false, errorf(mongoerr.CodeCommandNotFound, "no such command: '%s'", r.name)
	}
	routerCommands = map[string]routerCommand{
		"ping":                     {run: local(cmdPing)},
		"buildInfo":                {run: local(cmdBuildInfo)},
		"buildinfo":                {run: local(cmdBuildInfo)},
		"getParameter":             {run: local(cmdGetParameter), adminOnly: true},
		"setParameter":             {run: local(cmdSetParameter), adminOnly: true},
		"saslStart":                {run: local(cmdAuthFailed)},
		"saslContinue":             {run: local(cmdAuthFailed)},
		"authenticate":             {run: local(cmdAuthFailed)},
		"serverStatus":             {run: routerServerStatus},
		"startSession":             {run: local(cmdStartSession)},
		"refreshSessions":          {run: local(cmdOK)},
		"connectionStatus":         {run: local(cmdConnectionStatus)},
		"whatsmyuri":               {run: local(cmdWhatsMyURI)},
		"hostInfo":                 {run: local(cmdHostInfo)},
		"getCmdLineOpts":           {run: routerCmdLineOpts, adminOnly: true},
		"listCommands":             {run: routerListCommands},
		"configureFailPoint":       {run: local(cmdConfigureFailPoint), adminOnly: true},
		"replSetGetStatus":         {run: notOnMongos},
		"endSessions":              {run: routerBroadcastSessions},
		"killSessions":             {run: routerBroadcastSessions},
		"killAllSessions":          {run: routerBroadcastSessions},
		"getMore":                  {run: routerGetMore},
		"killCursors":              {run: routerKillCursors},
		"commitTransaction":        {run: routerEndTxn, adminOnly: true},
		"abortTransaction":         {run: routerEndTxn, adminOnly: true},
		"listDatabases":            {run: routerListDatabases, adminOnly: true},
		"dropDatabase":             {run: routerDropDatabase},
		"addShard":                 {run: routerAddShard, adminOnly: true},
		"listShards":               {run: routerListShards, adminOnly: true},
		"shardCollection":          {run: routerShardCollection, adminOnly: true},
		"enableSharding":           {run: routerEnableSharding, adminOnly: true},
		"moveChunk":                {run: routerMoveChunk, adminOnly: true},
		"reshardCollection":        {run: routerReshardCollection, adminOnly: true},
		"split":                    {run: routerSplit, adminOnly: true},
		"balancerStart":            {run: routerBalancerStart, adminOnly: true},
		"balancerStop":             {run: routerBalancerStop, adminOnly: true},
		"balancerStatus":           {run: routerBalancerStatus, adminOnly: true},
		"removeShard":              {run: routerRemoveShard, adminOnly: true},
		"checkMetadataConsistency": {run: routerCheckMetadataConsistency},

		cmdNameAdvanceClock: {run: routerAdvanceClock, adminOnly: true, testControl: true},
		cmdNameNow:          {run: local(cmdTestNow), adminOnly: true, testControl: true},
	}
}

// run executes one command sent to the mongos; nil means "close the
// connection without replying".
func (rt *router) run(ctx context.Context, c *conn, cmd bson.D, seqs []wire.Section1) bson.D {
	e := rt.e
	r := &request{ctx: ctx, conn: c, cmd: cmd, name: cmd[0].Key, seqs: seqs}
	for _, el := range cmd {
		switch el.Key {
		case "$db":
			r.db, _ = el.Value.(string)
		case "lsid":
			r.lsid, _ = el.Value.(bson.D)
		case "txnNumber":
			if n, ok := el.Value.(int64); ok {
				r.txnNumber = &n
			}
		case "autocommit":
			if b, ok := el.Value.(bool); ok {
				r.autocommit = &b
			}
		}
	}
	if r.db == "" {
		return rt.errorReply(errorf(40571, "OP_MSG requests require a $db argument"), r)
	}
	spec, ok := routerCommands[r.name]
	hello := r.name == "hello" || r.name == "isMaster" || r.name == "ismaster"
	if !ok && !hello {
		base, known := commands[r.name]
		if !known || base.testControl {
			return rt.errorReply(errorf(mongoerr.CodeCommandNotFound, "no such command: '%s'", r.name), r)
		}
		spec = routerCommand{run: routeByNamespace, adminOnly: base.adminOnly}
	}
	if spec.testControl && !e.cfg.testControls {
		return rt.errorReply(errTestControlsOff(r.name), r)
	}
	if spec.adminOnly && r.db != "admin" {
		return rt.errorReply(errorf(mongoerr.CodeUnauthorized, "%s may only be run against the admin database.", r.name), r)
	}
	var wce bson.D
	var fpLabels []string
	fpLabelsSet := false
	if c != nil {
		r.lastOpBefore = c.lastOp
		if hello {
			noteAppName(c, cmd)
		}
	}
	if r.name != "configureFailPoint" {
		if fp := e.fail.check("failCommand", r, requestNS(r)); fp != nil {
			if reply, done := rt.failCommand(r, fp); done {
				return reply
			}
			wce = fp.WriteConcernError
			fpLabels, fpLabelsSet = fp.ErrorLabels, fp.ErrorLabels != nil
		}
	}
	if hello {
		return rt.hello(c, cmd, r.name != "hello")
	}
	if err := checkSessionOptions(r); err != nil {
		return rt.errorReply(asCmdError(err), r)
	}
	reply, final, err := spec.run(rt, r)
	if r.closeConn {
		return nil
	}
	if err != nil {
		rt.implicitAbort(r, asCmdError(err).Code)
	} else if final {
		if ce := replyError(reply); ce != nil {
			rt.implicitAbort(r, ce.Code)
		} else if lookupD(reply, "writeErrors") != nil {
			rt.implicitAbort(r, 0)
		}
	}
	if err == nil {
		reply = rt.withRecoveryToken(r, reply)
	}
	if err != nil {
		ce := asCmdError(err)
		if fpLabelsSet && !ce.labelsSet {
			cp := *ce
			cp.Labels, cp.labelsSet = fpLabels, true
			ce = &cp
		}
		return rt.errorReply(ce, r)
	}
	if final {
		if wce == nil {
			return rt.noteReply(rt.withClusterTime(reply))
		}
		// A writeConcernError from the mongos' fail point joins the
		// shard's successful reply.
		reply = withoutFields(reply, "ok", "$clusterTime", "operationTime", "writeConcernError", "errorLabels")
	}
	if wce != nil {
		reply = append(reply, bson.E{Key: "writeConcernError", Value: normalizeWCE(wce)})
		labels := fpLabels
		if !fpLabelsSet {
			code, _ := asInt64(lookupD(wce, "code"))
			labels = e.replyLabels(0, int32(code), r)
		}
		if len(labels) > 0 {
			reply = append(reply, bson.E{Key: "errorLabels", Value: labelArray(labels)})
		}
	}
	reply = append(reply, bson.E{Key: "ok", Value: 1.0})
	return rt.noteReply(e.withOperationTime(reply, r.opTime))
}

// stateChangeCodes are the "not primary" and "node is recovering" codes
// (the NotPrimaryError and ShutdownError categories). A mongos attaches no
// topologyVersion to them (src/mongo/db/service_entry_point_common.cpp
// does for a replica-set member only), so a driver marks the mongos
// Unknown and waits for its monitor's next hello; the emulated mongos
// answers a waiting awaitable hello at once after returning one (kickHello),
// where a real one answers after maxAwaitTimeMS, so tests do not wait out
// heartbeatFrequencyMS.
var stateChangeCodes = map[int32]bool{
	mongoerr.CodeNotWritablePrimary: true, mongoerr.CodeNotPrimaryNoSecondaryOk: true, mongoerr.CodeNotPrimaryOrSecondary: true,
	mongoerr.CodeInterruptedDueToReplStateChange: true, mongoerr.CodePrimarySteppedDown: true,
	mongoerr.CodeShutdownInProgress: true, mongoerr.CodeInterruptedAtShutdown: true,
}

func (rt *router) topologyVersion() bson.D {
	return bson.D{{Key: "processId", Value: rt.processID}, {Key: "counter", Value: int64(0)}}
}

// errorReply is the engine's error reply; a state-change error wakes the
// mongos' awaitable hellos.
func (rt *router) errorReply(ce *cmdError, r *request) bson.D {
	if stateChangeCodes[ce.Code] {
		rt.kickHello()
	}
	return rt.e.errorReply(ce, r)
}

// noteReply wakes the awaitable hellos after a reply (a shard's, passed
// on, or one with a writeConcernError) with a state-change code.
func (rt *router) noteReply(reply bson.D) bson.D {
	code, _ := asInt64(lookupD(reply, "code"))
	wce, _ := lookupD(reply, "writeConcernError").(bson.D)
	wceCode, _ := asInt64(lookupD(wce, "code"))
	if stateChangeCodes[int32(code)] || stateChangeCodes[int32(wceCode)] {
		rt.kickHello()
	}
	return reply
}

// kickHello answers the awaitable hellos waiting on the mongos, 100 ms
// from now: after the driver has taken in the error and marked the mongos
// Unknown (a hello answered before would not bring it back).
func (rt *router) kickHello() {
	time.AfterFunc(100*time.Millisecond, func() {
		rt.mu.Lock()
		close(rt.helloKick)
		rt.helloKick = make(chan struct{})
		rt.mu.Unlock()
	})
}

// withClusterTime sets a shard's reply's $clusterTime to the cluster's.
func (rt *router) withClusterTime(reply bson.D) bson.D {
	ct := rt.cl.clock.current()
	for i, el := range reply {
		if el.Key == "$clusterTime" {
			out := append(bson.D(nil), reply...)
			out[i].Value = bson.D{
				{Key: "clusterTime", Value: ct},
				{Key: "signature", Value: bson.D{
					{Key: "hash", Value: bson.Binary{Subtype: 0, Data: make([]byte, 20)}},
					{Key: "keyId", Value: int64(0)},
				}},
			}
			return out
		}
	}
	return reply
}

// queryHello answers a handshake sent as OP_QUERY: the mongos' failCommand
// fail point applies to it as to any hello (nil: close the connection).
func (rt *router) queryHello(c *conn, cmd bson.D, legacy bool) bson.D {
	r := &request{ctx: c.srv.ctx, conn: c, cmd: cmd, name: cmd[0].Key, db: "admin"}
	noteAppName(c, cmd) // the handshake names the application its fail points match
	if fp := rt.e.fail.check("failCommand", r, ""); fp != nil {
		if reply, done := rt.failCommand(r, fp); done {
			return reply
		}
	}
	return rt.hello(c, cmd, legacy)
}

// failCommand applies a failCommand fail point that matched a request:
// it blocks, then closes the connection (nil, true) or fails the command
// (its error reply, true); done is false when the command is to run.
func (rt *router) failCommand(r *request, fp *FailPoint) (bson.D, bool) {
	if fp.BlockFor > 0 {
		t := time.NewTimer(fp.BlockFor)
		select {
		case <-t.C:
		case <-r.ctx.Done():
		}
		t.Stop()
	}
	if fp.CloseConnection {
		rt.kickHello()
		return nil, true
	}
	if fp.ErrorCode != 0 {
		ce := &cmdError{Code: fp.ErrorCode, Msg: "Failing command via 'failCommand' failpoint", Extra: fp.ErrorExtraInfo}
		if fp.ErrorLabels != nil {
			ce.Labels, ce.labelsSet = fp.ErrorLabels, true
		}
		return rt.errorReply(ce, r), true
	}
	return nil, false
}

// hello answers as a mongos does (src/mongo/s/mongos_hello_response.cpp):
// msg "isdbgrid", no setName and no hosts, so drivers see a sharded
// topology. A hello that carries the topologyVersion the mongos replied
// with and maxAwaitTimeMS (a driver's streaming monitor) waits that long
// before answering, as an awaitable hello does while nothing changes.
func (rt *router) hello(c *conn, cmd bson.D, legacy bool) bson.D {
	e := rt.e
	noteAppName(c, cmd)
	if tv, ok := lookupD(cmd, "topologyVersion").(bson.D); ok {
		if pid, _ := lookupD(tv, "processId").(bson.ObjectID); pid == rt.processID {
			if ms, ok := asInt64(lookupD(cmd, "maxAwaitTimeMS")); ok && ms > 0 {
				rt.mu.Lock()
				kick := rt.helloKick
				rt.mu.Unlock()
				t := time.NewTimer(time.Duration(ms) * time.Millisecond)
				select {
				case <-t.C:
				case <-kick:
				case <-c.srv.ctx.Done():
				}
				t.Stop()
			}
		}
	}
	primaryKey := "isWritablePrimary"
	if legacy {
		primaryKey = "ismaster"
	}
	reply := bson.D{}
	if mql.Truthy(lookupD(cmd, "helloOk")) {
		reply = append(reply, bson.E{Key: "helloOk", Value: true})
	}
	reply = append(reply,
		bson.E{Key: primaryKey, Value: true},
		bson.E{Key: "msg", Value: "isdbgrid"},
		bson.E{Key: "topologyVersion", Value: rt.topologyVersion()},
		bson.E{Key: "maxBsonObjectSize", Value: int32(16 * 1024 * 1024)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(48_000_000)},
		bson.E{Key: "maxWriteBatchSize", Value: int32(100_000)},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(e.now())},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		bson.E{Key: "connectionId", Value: c.id},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: e.cfg.release.wire()},
		bson.E{Key: "readOnly", Value: false},
		bson.E{Key: "ok", Value: 1.0},
	)
	return e.withClusterTime(reply)
}

// noteAppName records the application name a handshake's client metadata
// gives, the first time.
func noteAppName(c *conn, cmd bson.D) {
	if c.appName != "" {
		return
	}
	if cd, ok := lookupD(cmd, "client").(bson.D); ok {
		if ad, ok := lookupD(cd, "application").(bson.D); ok {
			c.appName, _ = lookupD(ad, "name").(string)
		}
	}
}

// shardConn returns the client connection's own connection to a shard,
// so a shard sees each client's commands on a connection of their own
// (its writes decide NoWritesPerformed, its application name the fail
// points).
func (rt *router) shardConn(c *conn, srv *Server) *conn {
	if c == nil {
		return &conn{srv: srv, viaRouter: true}
	}
	if c.routed == nil {
		c.routed = make(map[*Server]*conn)
	}
	ic := c.routed[srv]
	if ic == nil {
		ic = &conn{srv: srv, id: c.id, viaRouter: true}
		c.routed[srv] = ic
	}
	ic.appName = c.appName
	return ic
}

// send runs a command on a shard for a request and returns the shard's
// reply (nil: the shard closed the connection, as a fail point may).
func (rt *router) send(r *request, ic *conn, sh *shard, cmd bson.D, seqs []wire.Section1) bson.D {
	reply := sh.srv.eng.run(r.ctx, ic, cmd, seqs)
	if r.conn != nil && tsLess(r.conn.lastOp, ic.lastOp) {
		r.conn.lastOp = ic.lastOp
	}
	return reply
}

// forward sends a request's command to one shard and returns its reply as
// the mongos' own: a cursor it opened becomes a mongos cursor, a closed
// connection a HostUnreachable error.
func (rt *router) forward(r *request, sh *shard, cmd bson.D) (bson.D, bool, error) {
	cmd, err := rt.txnCommand(r, sh, cmd)
	if err != nil {
		return nil, false, err
	}
	ic := rt.shardConn(r.conn, sh.srv)
	reply := rt.send(r, ic, sh, cmd, r.seqs)
	if reply == nil {
		return nil, false, errorf(mongoerr.CodeHostUnreachable, "Connection closed by peer while running %s on shard %s", r.name, sh.id)
	}
	return rt.adoptCursor(reply, sh, r), true, nil
}

// txnCommand prepares a transaction's statement for a shard: the first
// statement a shard sees starts the transaction there (startTransaction
// and the transaction's read concern), later ones continue it.
func (rt *router) txnCommand(r *request, sh *shard, cmd bson.D) (bson.D, error) {
	if r.txnNumber == nil || r.autocommit == nil || r.lsid == nil {
		return cmd, nil
	}
	key := sessionKey(r.lsid)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	t := rt.txns[key]
	if start, _ := lookupD(cmd, "startTransaction").(bool); start {
		if t == nil || t.number != *r.txnNumber {
			t = &routerTxn{number: *r.txnNumber, readConcern: lookupD(cmd, "readConcern")}
			rt.txns[key] = t
		}
	}
	if t == nil || t.number != *r.txnNumber {
		return cmd, nil // the shard answers NoSuchTransaction
	}
	for _, p := range t.participants {
		if p == sh {
			return withoutFields(cmd, "startTransaction", "readConcern"), nil
		}
	}
	t.participants = append(t.participants, sh)
	out := withoutFields(cmd, "startTransaction", "readConcern")
	out = append(out, bson.E{Key: "startTransaction", Value: true})
	if t.readConcern != nil {
		out = append(out, bson.E{Key: "readConcern", Value: t.readConcern})
	}
	return out, nil
}

// implicitAbort aborts, on every shard that took part, a transaction
// whose statement failed while the mongos ran it, as mongos does
// (src/mongo/s/commands/strategy.cpp: every error but the snapshot,
// NeedRetargetting, StaleDbVersion and WouldChangeOwningShard ones): the
// transaction is over, and a commit of it fails with NoSuchTransaction.
// Errors of the mongos' own fail points come before the command runs, and
// abort nothing.
func (rt *router) implicitAbort(r *request, code int32) {
	if r.txnNumber == nil || r.autocommit == nil || r.lsid == nil || isCommitOrAbort(r.name) {
		return
	}
	switch {
	case needRetargettingCodes[code], code == mongoerr.CodeStaleDbVersion, code == codeWouldChangeOwningShard,
		code == mongoerr.CodeSnapshotTooOld, code == mongoerr.CodeSnapshotUnavailable, code == mongoerr.CodeStaleChunkHistory,
		code == mongoerr.CodeMigrationConflict:
		return
	}
	key := sessionKey(r.lsid)
	rt.mu.Lock()
	t := rt.txns[key]
	if t == nil || t.number != *r.txnNumber {
		rt.mu.Unlock()
		return
	}
	delete(rt.txns, key)
	parts := t.participants
	rt.mu.Unlock()
	for _, sh := range parts {
		cmd := bson.D{{Key: "abortTransaction", Value: int32(1)}, {Key: "lsid", Value: r.lsid}, {Key: "txnNumber", Value: *r.txnNumber},
			{Key: "autocommit", Value: false}, {Key: "$db", Value: "admin"}}
		sh.srv.eng.run(r.ctx, &conn{srv: sh.srv}, cmd, nil)
	}
}

// withRecoveryToken adds to the reply of a transaction's statement the
// recoveryToken a mongos returns (drivers send it back with
// commitTransaction and abortTransaction): the shard that would recover
// the transaction's outcome, its first participant.
func (rt *router) withRecoveryToken(r *request, reply bson.D) bson.D {
	if r.txnNumber == nil || r.autocommit == nil || r.lsid == nil {
		return reply
	}
	tok := bson.D{}
	rt.mu.Lock()
	if t := rt.txns[sessionKey(r.lsid)]; t != nil && t.number == *r.txnNumber && len(t.participants) > 0 {
		tok = bson.D{{Key: "recoveryShardId", Value: t.participants[0].id}}
	}
	rt.mu.Unlock()
	return replaceField(reply, "recoveryToken", tok)
}

// routerEndTxn commits or aborts a transaction on each shard that took
// part, one after the other: each shard's part commits at a time of its
// own (a real cluster's two-phase commit may also give each shard its
// own commit time), and a shard's error is the reply.
func routerEndTxn(rt *router, r *request) (bson.D, bool, error) {
	if r.lsid == nil || r.txnNumber == nil {
		return nil, false, errorf(mongoerr.CodeInvalidOptions, "%s must be run within a transaction (lsid and txnNumber)", r.name)
	}
	rt.mu.Lock()
	t := rt.txns[sessionKey(r.lsid)]
	var parts []*shard
	if t != nil && t.number == *r.txnNumber {
		parts = append(parts, t.participants...)
	}
	rt.mu.Unlock()
	if t == nil || t.number != *r.txnNumber || len(parts) == 0 {
		if r.name == "commitTransaction" && t != nil && t.number == *r.txnNumber {
			return bson.D{}, false, nil // nothing was read or written
		}
		return nil, false, errorf(mongoerr.CodeNoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", *r.txnNumber)
	}
	var last bson.D
	for _, sh := range parts {
		ic := rt.shardConn(r.conn, sh.srv)
		reply := rt.send(r, ic, sh, r.cmd, nil)
		if reply == nil {
			return nil, false, errorf(mongoerr.CodeHostUnreachable, "Connection closed by peer while running %s on shard %s", r.name, sh.id)
		}
		last = reply
		if replyError(reply) != nil && r.name == "commitTransaction" {
			return reply, true, nil
		}
	}
	return last, true, nil
}

// routeByNamespace runs a command about a namespace: on the config server
// for the config database, on the shards that own the data of a sharded
// collection, and on the database's primary shard otherwise.
func routeByNamespace(rt *router, r *request) (bson.D, bool, error) {
	db := r.db
	coll, _ := r.cmd[0].Value.(string)
	switch r.name {
	case "renameCollection":
		db, coll, _ = splitNS(coll)
	case "bulkWrite":
		return routerBulkWrite(rt, r)
	}
	if db == "config" {
		return rt.forwardConfig(r)
	}
	if r.name == "aggregate" && isChangeStreamPipeline(r.cmd) {
		return routerOpenStream(rt, r)
	}
	if coll != "" {
		if m := rt.sharded(db + "." + coll); m != nil {
			return rt.shardedCommand(r, m)
		}
	}
	create := db != "admin" && db != "local"
	sh := rt.primaryShard(r.ctx, db, create)
	return rt.forward(r, sh, r.cmd)
}

// forwardConfig runs a command on the config server.
func (rt *router) forwardConfig(r *request) (bson.D, bool, error) {
	cs := &shard{id: "config", srv: rt.cl.config}
	reply := rt.cl.config.eng.run(r.ctx, rt.shardConn(r.conn, cs.srv), r.cmd, r.seqs)
	if reply == nil {
		return nil, false, errorf(mongoerr.CodeHostUnreachable, "Connection closed by peer while running %s on the config server", r.name)
	}
	return rt.adoptCursor(reply, cs, r), true, nil
}

func isChangeStreamPipeline(cmd bson.D) bool {
	p, _ := lookupTop(cmd, "pipeline")
	if a, ok := p.(bson.A); ok && len(a) > 0 {
		if st, ok := a[0].(bson.D); ok && len(st) > 0 && st[0].Key == "$changeStream" {
			return true
		}
	}
	return false
}

// routerBroadcastSessions ends or kills sessions on every shard, and
// forgets their transactions.
func routerBroadcastSessions(rt *router, r *request) (bson.D, bool, error) {
	rt.mu.Lock()
	switch r.name {
	case "killAllSessions":
		rt.txns = make(map[string]*routerTxn)
	default:
		ids, _ := r.cmd[0].Value.(bson.A)
		for _, v := range ids {
			if lsid, ok := v.(bson.D); ok {
				delete(rt.txns, sessionKey(lsid))
			}
		}
	}
	shards := rt.liveShards()
	rt.mu.Unlock()
	for _, sh := range shards {
		reply := rt.send(r, rt.shardConn(r.conn, sh.srv), sh, r.cmd, nil)
		if err := replyError(reply); err != nil {
			return nil, false, err
		}
	}
	return bson.D{}, false, nil
}

// routerListDatabases lists the databases of every shard, merged by name.
func routerListDatabases(rt *router, r *request) (bson.D, bool, error) {
	rt.mu.Lock()
	shards := rt.liveShards()
	rt.mu.Unlock()
	type dbInfo struct {
		size  int64
		empty bool
	}
	merged := map[string]*dbInfo{}
	var names []string
	nameOnly := boolArg(r, "nameOnly", false)
	for _, sh := range shards {
		reply := rt.send(r, rt.shardConn(r.conn, sh.srv), sh, r.cmd, nil)
		if err := replyError(reply); err != nil {
			return nil, false, err
		}
		dbs, _ := lookupD(reply, "databases").(bson.A)
		for _, v := range dbs {
			d, _ := v.(bson.D)
			name, _ := lookupD(d, "name").(string)
			size, _ := asInt64(lookupD(d, "sizeOnDisk"))
			empty, _ := lookupD(d, "empty").(bool)
			m := merged[name]
			if m == nil {
				m = &dbInfo{empty: true}
				merged[name] = m
				names = append(names, name)
			}
			m.size += size
			m.empty = m.empty && empty
		}
	}
	sort.Strings(names)
	out := bson.A{}
	var total int64
	for _, n := range names {
		m := merged[n]
		total += m.size
		if nameOnly {
			out = append(out, bson.D{{Key: "name", Value: n}})
			continue
		}
		out = append(out, bson.D{{Key: "name", Value: n}, {Key: "sizeOnDisk", Value: m.size}, {Key: "empty", Value: m.empty}})
	}
	reply := bson.D{{Key: "databases", Value: out}}
	if !nameOnly {
		reply = append(reply, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total >> 20})
	}
	return reply, false, nil
}

// routerDropDatabase drops a database on every shard and forgets its
// routing entries.
func routerDropDatabase(rt *router, r *request) (bson.D, bool, error) {
	rt.mu.Lock()
	shards := rt.liveShards()
	rt.mu.Unlock()
	var primaryReply bson.D
	primary := rt.primaryShard(r.ctx, r.db, false)
	for _, sh := range shards {
		cmd, err := rt.txnCommand(r, sh, r.cmd)
		if err != nil {
			return nil, false, err
		}
		reply := rt.send(r, rt.shardConn(r.conn, sh.srv), sh, cmd, nil)
		if err := replyError(reply); err != nil {
			return reply, true, nil
		}
		if sh == primary {
			primaryReply = reply
		}
	}
	rt.dropDatabaseMeta(r.ctx, r.db)
	if primaryReply == nil {
		return bson.D{}, false, nil
	}
	return primaryReply, true, nil
}

// dropDatabaseMeta forgets a database and its sharded collections.
func (rt *router) dropDatabaseMeta(ctx context.Context, db string) {
	rt.mu.Lock()
	_, had := rt.dbs[db]
	delete(rt.dbs, db)
	var dropped []string
	for ns, m := range rt.colls {
		if m.db == db {
			delete(rt.colls, ns)
			rt.forgetPlacement(ns)
			dropped = append(dropped, ns)
		}
	}
	rt.mu.Unlock()
	if had {
		rt.configCommand(ctx, "config", bson.D{{Key: "delete", Value: "databases"}, {Key: "deletes", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "_id", Value: db}}}, {Key: "limit", Value: int32(1)}}}}})
	}
	for _, ns := range dropped {
		rt.forgetCollectionConfig(ctx, ns)
	}
}

func routerAddShard(rt *router, r *request) (bson.D, bool, error) {
	sh, err := rt.addShard(r.ctx)
	if err != nil {
		return nil, false, errorf(mongoerr.CodeOperationFailed, "addShard: %v", err)
	}
	return bson.D{{Key: "shardAdded", Value: sh.id}}, false, nil
}

func routerListShards(rt *router, r *request) (bson.D, bool, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := bson.A{}
	for _, sh := range rt.liveShards() {
		out = append(out, bson.D{{Key: "_id", Value: sh.id}, {Key: "host", Value: sh.host()}, {Key: "state", Value: int32(1)},
			{Key: "topologyTime", Value: sh.addedAt}})
	}
	return bson.D{{Key: "shards", Value: out}}, false, nil
}

func routerAdvanceClock(rt *router, r *request) (bson.D, bool, error) {
	ms, ok := asInt64(r.cmd[0].Value)
	if !ok || ms > 1<<62/int64(time.Millisecond) || ms < -(1<<62)/int64(time.Millisecond) {
		return nil, false, errorf(mongoerr.CodeTypeMismatch, "%s takes a whole number of milliseconds, got %v", cmdNameAdvanceClock, r.cmd[0].Value)
	}
	rt.cl.AdvanceClock(time.Duration(ms) * time.Millisecond)
	return clockReply(rt.e.now()), false, nil
}

func routerServerStatus(rt *router, r *request) (bson.D, bool, error) {
	e := rt.e
	now := e.now()
	r.conn.srv.mu.Lock()
	conns := len(r.conn.srv.conns)
	r.conn.srv.mu.Unlock()
	return bson.D{
		{Key: "host", Value: r.conn.srv.Addr()},
		{Key: "version", Value: e.cfg.release.String()},
		{Key: "process", Value: "mongos"},
		{Key: "pid", Value: int64(1)},
		{Key: "uptime", Value: now.Sub(e.startedAt).Seconds()},
		{Key: "uptimeMillis", Value: now.Sub(e.startedAt).Milliseconds()},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
		{Key: "connections", Value: bson.D{{Key: "current", Value: int32(conns)}}},
		{Key: "sharding", Value: bson.D{{Key: "configsvrConnectionString", Value: "configRepl/" + rt.cl.config.Addr()}}},
	}, false, nil
}

func routerCmdLineOpts(rt *router, r *request) (bson.D, bool, error) {
	return bson.D{{Key: "argv", Value: bson.A{"mongos"}}, {Key: "parsed", Value: bson.D{{Key: "sharding", Value: bson.D{
		{Key: "configDB", Value: "configRepl/" + rt.cl.config.Addr()}}}}}}, false, nil
}

func routerListCommands(rt *router, r *request) (bson.D, bool, error) {
	cmds := bson.D{}
	seen := map[string]bool{}
	for name, spec := range routerCommands {
		if spec.testControl && !rt.e.cfg.testControls {
			continue
		}
		seen[name] = true
		cmds = append(cmds, bson.E{Key: name, Value: bson.D{{Key: "help", Value: ""}}})
	}
	for name, spec := range commands {
		if seen[name] || spec.testControl {
			continue
		}
		cmds = append(cmds, bson.E{Key: name, Value: bson.D{{Key: "help", Value: ""}}})
	}
	return bson.D{{Key: "commands", Value: cmds}}, false, nil
}

// codeWouldChangeOwningShard is WouldChangeOwningShard (error_codes.yml).
const codeWouldChangeOwningShard = 283

// routerEnableSharding creates a database's routing entry: {enableSharding:
// "db", primaryShard?: "shardN"} (not needed since 6.0: shardCollection
// creates it).
func routerEnableSharding(rt *router, r *request) (bson.D, bool, error) {
	db, ok := r.cmd[0].Value.(string)
	if !ok || db == "" {
		return nil, false, errorf(mongoerr.CodeInvalidNamespace, "enableSharding takes a database name, got %v", r.cmd[0].Value)
	}
	if want, ok := lookupD(r.cmd, "primaryShard").(string); ok {
		rt.mu.Lock()
		sh := rt.shardByID(want)
		if sh == nil {
			rt.mu.Unlock()
			return nil, false, errorf(codeShardNotFound, "enableSharding: no shard %q (listShards lists them)", want)
		}
		if m := rt.dbs[db]; m != nil && m.primary != sh {
			rt.mu.Unlock()
			return nil, false, errorf(mongoerr.CodeNamespaceExists, "database %s already exists with primary shard %s", db, m.primary.id)
		}
		if rt.dbs[db] == nil {
			rt.dbs[db] = &dbMeta{name: db, primary: sh}
			rt.mu.Unlock()
			rt.configCommand(r.ctx, "config", bson.D{{Key: "insert", Value: "databases"}, {Key: "documents", Value: bson.A{bson.D{
				{Key: "_id", Value: db}, {Key: "primary", Value: sh.id}}}}})
			return bson.D{}, false, nil
		}
		rt.mu.Unlock()
	}
	rt.primaryShard(r.ctx, db, true)
	return bson.D{}, false, nil
}

// routerCheckMetadataConsistency is checkMetadataConsistency (7.0+): a
// cursor over the inconsistencies between the shards' metadata and the
// config server's, which the emulated cluster, whose metadata has one
// owner, never has.
func routerCheckMetadataConsistency(rt *router, r *request) (bson.D, bool, error) {
	ns := r.db + ".$cmd.checkMetadataConsistency"
	if coll, ok := r.cmd[0].Value.(string); ok {
		ns = r.db + "." + coll
	}
	return cursorReply(true, 0, ns, bson.A{}), false, nil
}

// cmdAuthFailed answers authentication on a mongos, which has no users:
// every client with credentials fails as with an unknown user.
func cmdAuthFailed(*engine, *request) (bson.D, error) {
	return nil, errorf(mongoerr.CodeAuthenticationFailed, "Authentication failed.")
}
