package mongotest

import (
	"context"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/wire"
)

// request is one command being run.
type request struct {
	ctx  context.Context
	conn *conn
	cmd  bson.D
	name string
	db   string
	// Session and transaction fields, when present.
	lsid       bson.D
	txnNumber  *int64
	autocommit *bool
	// streamCursor is set by getMore once it has checked out a
	// change-stream cursor (it decides ResumableChangeStreamError).
	streamCursor bool
	// txn is the transaction the command runs in, if any (for a snapshot
	// read, a read-only one).
	txn *txn
	// seqs are the OP_MSG document sequences, still encoded.
	seqs []wire.Section1
	// retry is what the server remembers of the retryable write the
	// command is (nil: not one).
	retry *retryState
	// closeConn is set by a fail point that drops the connection once
	// the command has run (onPrimaryTransactionalWrite).
	closeConn bool
	// opTime, when set, is the reply's operationTime (a retried write
	// answers with the time of the write it replays).
	opTime *bson.Timestamp
	// lastOpBefore is the connection's last write before this command.
	lastOpBefore bson.Timestamp
	// atClusterTime is the time a snapshot read read at.
	atClusterTime *bson.Timestamp
}

// rawSequence returns the encoded documents of the named document
// sequence, if the command arrived with one.
func (r *request) rawSequence(name string) []bson.Raw {
	for _, s := range r.seqs {
		if s.Identifier == name {
			return s.Documents
		}
	}
	return nil
}

func (r *request) arg(key string) (any, bool) { return lookupTop(r.cmd, key) }

// command describes how one command is run.
type command struct {
	run func(e *engine, r *request) (bson.D, error)
	// unlocked commands take e.mu themselves (they may wait).
	unlocked bool
	// adminOnly commands must be sent to the admin database.
	adminOnly bool
	// testControl commands run only on a server started with
	// TestControls (testcontrols.go).
	testControl bool
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"hello":              {run: cmdHello, unlocked: true},
		"isMaster":           {run: cmdHello, unlocked: true},
		"ismaster":           {run: cmdHello, unlocked: true},
		"ping":               {run: cmdPing},
		"saslStart":          {run: cmdSaslStart, unlocked: true},
		"saslContinue":       {run: cmdSaslContinue, unlocked: true},
		"authenticate":       {run: cmdAuthenticate},
		"logout":             {run: cmdLogout},
		"buildInfo":          {run: cmdBuildInfo},
		"buildinfo":          {run: cmdBuildInfo},
		"getParameter":       {run: cmdGetParameter, adminOnly: true},
		"setParameter":       {run: cmdSetParameter, adminOnly: true},
		"serverStatus":       {run: cmdServerStatus},
		"endSessions":        {run: cmdEndSessions},
		"killAllSessions":    {run: cmdKillAllSessions},
		"killSessions":       {run: cmdEndSessions},
		"refreshSessions":    {run: cmdOK},
		"startSession":       {run: cmdStartSession},
		"connectionStatus":   {run: cmdConnectionStatus},
		"whatsmyuri":         {run: cmdWhatsMyURI},
		"hostInfo":           {run: cmdHostInfo},
		"getCmdLineOpts":     {run: cmdGetCmdLineOpts, adminOnly: true},
		"replSetGetStatus":   {run: cmdReplSetGetStatus, adminOnly: true},
		"listCommands":       {run: cmdListCommands},
		"insert":             {run: cmdInsert},
		"update":             {run: cmdUpdate},
		"delete":             {run: cmdDelete},
		"find":               {run: cmdFind},
		"getMore":            {run: cmdGetMore, unlocked: true},
		"killCursors":        {run: cmdKillCursors},
		"findAndModify":      {run: cmdFindAndModify},
		"findandmodify":      {run: cmdFindAndModify},
		"aggregate":          {run: cmdAggregate},
		"count":              {run: cmdCount},
		"distinct":           {run: cmdDistinct},
		"create":             {run: cmdCreate},
		"drop":               {run: cmdDrop},
		"dropDatabase":       {run: cmdDropDatabase},
		"listCollections":    {run: cmdListCollections},
		"listDatabases":      {run: cmdListDatabases, adminOnly: true},
		"createIndexes":      {run: cmdCreateIndexes},
		"listIndexes":        {run: cmdListIndexes},
		"dropIndexes":        {run: cmdDropIndexes},
		"deleteIndexes":      {run: cmdDropIndexes},
		"renameCollection":   {run: cmdRenameCollection, adminOnly: true},
		"collMod":            {run: cmdCollMod},
		"dbStats":            {run: cmdDBStats},
		"collStats":          {run: cmdCollStats},
		"configureFailPoint": {run: cmdConfigureFailPoint, adminOnly: true},
		"commitTransaction":  {run: cmdCommitTransaction, adminOnly: true},
		"abortTransaction":   {run: cmdAbortTransaction, adminOnly: true},
		"bulkWrite":          {run: cmdBulkWrite, adminOnly: true},

		cmdNameAdvanceClock: {run: cmdTestAdvanceClock, unlocked: true, adminOnly: true, testControl: true},
		cmdNameNow:          {run: cmdTestNow, unlocked: true, adminOnly: true, testControl: true},
	}
}

// run executes one command and returns its reply; nil means "close the
// connection without replying".
func (e *engine) run(ctx context.Context, c *conn, cmd bson.D, seqs []wire.Section1) bson.D {
	if len(cmd) == 0 {
		return e.errorReply(errorf(mongoerr.CodeFailedToParse, "empty command document"), nil)
	}
	if e.router != nil { // a mongos
		return e.router.run(ctx, c, cmd, seqs)
	}
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
		return e.errorReply(errorf(40571, "OP_MSG requests require a $db argument"), r)
	}
	spec, ok := commands[r.name]
	if !ok || r.name == "bulkWrite" && !e.cfg.release.hasBulkWrite() {
		return e.errorReply(errorf(mongoerr.CodeCommandNotFound, "no such command: '%s'", r.name), r)
	}
	if spec.testControl && !e.cfg.testControls {
		return e.errorReply(errTestControlsOff(r.name), r)
	}
	if spec.adminOnly && r.db != "admin" {
		return e.errorReply(errorf(mongoerr.CodeUnauthorized, "%s may only be run against the admin database.", r.name), r)
	}
	if err := e.authorize(r); err != nil {
		return e.errorReply(asCmdError(err), r)
	}
	if c != nil && c.member > 0 {
		if err := e.secondaryAllows(r); err != nil {
			return e.errorReply(asCmdError(err), r)
		}
	}
	var wce bson.D
	var fpLabels []string
	fpLabelsSet := false
	if c != nil {
		r.lastOpBefore = c.lastOp
	}
	// Fail points belong to the primary (a secondary refuses to set them).
	if r.name != "configureFailPoint" && (c == nil || c.member == 0) {
		if fp := e.fail.check("failCommand", r, requestNS(r)); fp != nil {
			if fp.BlockFor > 0 {
				t := time.NewTimer(fp.BlockFor)
				select {
				case <-t.C:
				case <-ctx.Done():
				}
				t.Stop()
			}
			if fp.CloseConnection {
				return nil
			}
			if fp.ErrorCode != 0 {
				ce := &cmdError{Code: fp.ErrorCode, Msg: "Failing command via 'failCommand' failpoint", Extra: fp.ErrorExtraInfo}
				if fp.ErrorLabels != nil {
					ce.Labels, ce.labelsSet = fp.ErrorLabels, true
				}
				return e.errorReply(ce, r)
			}
			wce = fp.WriteConcernError
			fpLabels, fpLabelsSet = fp.ErrorLabels, fp.ErrorLabels != nil
		}
	}
	reply, err := e.execute(spec, r)
	if r.closeConn {
		return nil
	}
	if err != nil {
		ce := asCmdError(err)
		if fpLabelsSet && !ce.labelsSet {
			cp := *ce
			cp.Labels, cp.labelsSet = fpLabels, true
			ce = &cp
		}
		return e.errorReply(ce, r)
	}
	if wce == nil {
		wce = e.writeConcernError(r)
	} else {
		wce = normalizeWCE(wce)
	}
	if wce != nil {
		reply = append(reply, bson.E{Key: "writeConcernError", Value: wce})
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
	return e.withOperationTime(reply, r.opTime)
}

// execute runs a command: unlocked ones as they are, the others under the
// engine lock, as a transaction statement, a retryable write, a snapshot
// read or a plain command.
func (e *engine) execute(spec command, r *request) (bson.D, error) {
	if err := checkSessionOptions(r); err != nil {
		return nil, err
	}
	if spec.unlocked {
		return spec.run(e, r)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.conn != nil && r.conn.fromMigrate { // a sharded DDL's participant (sharded.go)
		e.fromMigrate = true
		defer func() { e.fromMigrate = false }()
	}
	before := e.oplog.nextSeq
	defer func() {
		if r.conn != nil && (e.oplog.nextSeq != before || r.opTime != nil) {
			r.conn.lastOp = e.lastTS
		}
	}()
	switch {
	case r.txnNumber != nil && e.cfg.standalone:
		return nil, errorf(mongoerr.CodeIllegalOperation, "Transaction numbers are only allowed on a replica set member or mongos")
	case r.txnNumber != nil && r.autocommit != nil:
		if r.lsid == nil {
			return nil, errorf(mongoerr.CodeInvalidOptions, "Transaction numbers are only allowed on a replica set member or mongos with a session (lsid)")
		}
		sess, err := e.checkout(r)
		if err != nil {
			return nil, err
		}
		defer e.checkin(sess)
		return e.runTxn(spec, r)
	case r.txnNumber != nil:
		return e.runRetryable(spec, r)
	}
	if err := e.checkReadConcern(r); err != nil {
		return nil, err
	}
	reply, err := spec.run(e, r)
	if err == nil && r.atClusterTime != nil {
		reply = withAtClusterTime(reply, *r.atClusterTime)
	}
	return reply, err
}

func labelArray(labels []string) bson.A {
	a := make(bson.A, len(labels))
	for i, l := range labels {
		a[i] = l
	}
	return a
}

// requestNS is the "db.coll" a command names, or "" when it names none.
func requestNS(r *request) string {
	if r.name == "getMore" {
		// A getMore names its cursor; its namespace is the collection
		// field, as the server's fail points see it.
		for _, el := range r.cmd {
			if el.Key == "collection" {
				if s, ok := el.Value.(string); ok {
					return r.db + "." + s
				}
			}
		}
		return ""
	}
	if s, ok := r.cmd[0].Value.(string); ok {
		return r.db + "." + s
	}
	return ""
}

func (e *engine) withClusterTime(reply bson.D) bson.D { return e.withOperationTime(reply, nil) }

// withOperationTime appends $clusterTime and operationTime (opTime, or the
// cluster time when nil).
func (e *engine) withOperationTime(reply bson.D, opTime *bson.Timestamp) bson.D {
	if e.cfg.standalone {
		return reply // a standalone server keeps no cluster time
	}
	ct := e.clusterTime()
	op := ct
	if opTime != nil {
		op = *opTime
	}
	return append(reply,
		bson.E{Key: "$clusterTime", Value: bson.D{
			{Key: "clusterTime", Value: ct},
			{Key: "signature", Value: bson.D{
				{Key: "hash", Value: bson.Binary{Subtype: 0, Data: make([]byte, 20)}},
				{Key: "keyId", Value: int64(0)},
			}},
		}},
		bson.E{Key: "operationTime", Value: op},
	)
}

// errorReply builds {ok: 0, errmsg, code, codeName, errorLabels?} with the
// labels a real server attaches (MONGO-SEMANTICS §5.2).
func (e *engine) errorReply(ce *cmdError, r *request) bson.D {
	reply := bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: ce.Msg},
		{Key: "code", Value: ce.Code},
		{Key: "codeName", Value: ce.codeName()},
	}
	reply = append(reply, ce.Extra...)
	labels := ce.Labels
	if !ce.labelsSet && r != nil {
		labels = e.labelsFor(ce.Code, r)
	}
	if len(labels) > 0 {
		reply = append(reply, bson.E{Key: "errorLabels", Value: labelArray(labels)})
	}
	return e.withClusterTime(reply)
}

func isWriteCommand(name string) bool {
	switch name {
	case "insert", "update", "delete", "findAndModify", "findandmodify", "bulkWrite":
		return true
	}
	return false
}

// isChangeStreamRequest reports whether an aggregate opens a change stream,
// or a getMore continues one.
func (e *engine) isChangeStreamRequest(r *request) bool {
	switch r.name {
	case "aggregate":
		p, _ := lookupTop(r.cmd, "pipeline")
		if a, ok := p.(bson.A); ok && len(a) > 0 {
			if st, ok := a[0].(bson.D); ok && len(st) > 0 && st[0].Key == "$changeStream" {
				return true
			}
		}
	case "getMore":
		// A getMore fails before or after checking out its cursor; only
		// after does the server know it continues a change stream.
		return r.streamCursor
	}
	return false
}

func cmdOK(*engine, *request) (bson.D, error) { return bson.D{}, nil }

func cmdPing(*engine, *request) (bson.D, error) { return bson.D{}, nil }

func cmdBuildInfo(e *engine, _ *request) (bson.D, error) {
	v := e.cfg.release
	return bson.D{
		{Key: "version", Value: v.String()},
		{Key: "gitVersion", Value: "mongotest"},
		{Key: "versionArray", Value: bson.A{int32(v.major), int32(v.minor), int32(v.patch), int32(0)}},
		{Key: "bits", Value: int32(64)},
		{Key: "debug", Value: false},
		{Key: "maxBsonObjectSize", Value: int32(16 * 1024 * 1024)},
		{Key: "storageEngines", Value: bson.A{"mongotest"}},
		{Key: "modules", Value: bson.A{}},
		{Key: "javascriptEngine", Value: "none"},
	}, nil
}

func cmdGetParameter(e *engine, r *request) (bson.D, error) {
	all := bson.D{
		{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: e.cfg.release.fcv()}}},
		{Key: "ttlMonitorSleepSecs", Value: int32(e.params.ttlMonitorSleep / time.Second)},
		{Key: "ttlMonitorEnabled", Value: e.params.ttlEnabled},
		{Key: "enableTestCommands", Value: int32(1)},
		{Key: "authenticationMechanisms", Value: e.authMechanisms()},
		{Key: "authSchemaVersion", Value: int32(5)},
		{Key: "requireApiVersion", Value: false},
		{Key: "transactionLifetimeLimitSeconds", Value: int32(e.params.txnLifetime / time.Second)},
		{Key: "periodicNoopIntervalSecs", Value: int32(e.params.noopInterval / time.Second)},
		{Key: "minSnapshotHistoryWindowInSeconds", Value: int32(e.params.snapshotWindow / time.Second)},
	}
	v, _ := r.arg("getParameter")
	if e.cfg.atlasShared && !atlasAllowsGetParameter(r) {
		return nil, atlasRefusal("getParameter")
	}
	if v == "*" {
		return all, nil
	}
	var out bson.D
	for _, el := range r.cmd[1:] {
		if strings.HasPrefix(el.Key, "$") || isGenericArg(el.Key) {
			continue
		}
		v, ok := lookupTop(all, el.Key)
		if !ok {
			return nil, errorf(mongoerr.CodeInvalidOptions, "no option found to get")
		}
		out = append(out, bson.E{Key: el.Key, Value: v})
	}
	if len(out) == 0 {
		return nil, errorf(mongoerr.CodeInvalidOptions, "no option found to get")
	}
	return out, nil
}

// atlasAllowsGetParameter reports whether r is one of the two getParameter
// forms an Atlas shared-tier cluster runs: {getParameter: 1,
// authSchemaVersion: 1} and {getParameter: 1, authenticationMechanisms: 1}.
func atlasAllowsGetParameter(r *request) bool {
	if v, _ := r.arg("getParameter"); v == "*" {
		return false
	}
	var names []string
	for _, el := range r.cmd[1:] {
		if !strings.HasPrefix(el.Key, "$") && !isGenericArg(el.Key) {
			names = append(names, el.Key)
		}
	}
	return len(names) == 1 && (names[0] == "authSchemaVersion" || names[0] == "authenticationMechanisms")
}

func cmdSetParameter(e *engine, r *request) (bson.D, error) {
	var was bson.D
	n := 0
	for _, el := range r.cmd[1:] {
		if strings.HasPrefix(el.Key, "$") || isGenericArg(el.Key) {
			continue
		}
		n++
		switch el.Key {
		case "ttlMonitorSleepSecs":
			secs, ok := asInt64(el.Value)
			if !ok || secs < 1 {
				return nil, errorf(mongoerr.CodeBadValue, "ttlMonitorSleepSecs must be a positive number of seconds")
			}
			was = append(was, bson.E{Key: "was", Value: int32(e.params.ttlMonitorSleep / time.Second)})
			e.params.ttlMonitorSleep = time.Duration(secs) * time.Second
		case "ttlMonitorEnabled":
			b, ok := el.Value.(bool)
			if !ok {
				return nil, errorf(mongoerr.CodeBadValue, "ttlMonitorEnabled must be a boolean")
			}
			was = append(was, bson.E{Key: "was", Value: e.params.ttlEnabled})
			e.params.ttlEnabled = b
		case "transactionLifetimeLimitSeconds":
			secs, ok := asInt64(el.Value)
			if !ok || secs < 1 {
				return nil, errorf(mongoerr.CodeBadValue, "transactionLifetimeLimitSeconds must be a positive number of seconds")
			}
			was = append(was, bson.E{Key: "was", Value: int32(e.params.txnLifetime / time.Second)})
			e.params.txnLifetime = time.Duration(secs) * time.Second
		case "periodicNoopIntervalSecs":
			secs, ok := asInt64(el.Value)
			if !ok || secs < 1 {
				return nil, errorf(mongoerr.CodeBadValue, "periodicNoopIntervalSecs must be a positive number of seconds")
			}
			was = append(was, bson.E{Key: "was", Value: int32(e.params.noopInterval / time.Second)})
			e.params.noopInterval = time.Duration(secs) * time.Second
		case "minSnapshotHistoryWindowInSeconds":
			secs, ok := asInt64(el.Value)
			if !ok || secs < 0 {
				return nil, errorf(mongoerr.CodeBadValue, "minSnapshotHistoryWindowInSeconds must be a non-negative number of seconds")
			}
			was = append(was, bson.E{Key: "was", Value: int32(e.params.snapshotWindow / time.Second)})
			e.params.snapshotWindow = time.Duration(secs) * time.Second
		default:
			return nil, errorf(mongoerr.CodeInvalidOptions, "attempted to set unrecognized parameter [%s], use help:true to see options ", el.Key)
		}
	}
	if n == 0 {
		return nil, errorf(mongoerr.CodeInvalidOptions, "no option found to set, use help:true to see options ")
	}
	if len(was) > 1 {
		was = was[:1]
	}
	select {
	case e.ttlKick <- struct{}{}:
	default:
	}
	return was, nil
}

func cmdServerStatus(e *engine, r *request) (bson.D, error) {
	now := e.nowLocked()
	return bson.D{
		{Key: "host", Value: r.conn.srv.Addr()},
		{Key: "version", Value: e.cfg.release.String()},
		{Key: "process", Value: "mongod"},
		{Key: "pid", Value: int64(1)},
		{Key: "uptime", Value: now.Sub(e.startedAt).Seconds()},
		{Key: "uptimeMillis", Value: now.Sub(e.startedAt).Milliseconds()},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
		{Key: "connections", Value: bson.D{{Key: "current", Value: int32(r.conn.srv.connCount())}}},
		{Key: "repl", Value: bson.D{{Key: "setName", Value: e.cfg.replSetName}, {Key: "isWritablePrimary", Value: r.conn.member == 0}}},
		{Key: "storageEngine", Value: bson.D{{Key: "name", Value: "mongotest"}, {Key: "supportsCommittedReads", Value: true}}},
		{Key: "oplog", Value: bson.D{{Key: "entries", Value: int64(len(e.oplog.entries))}, {Key: "bytes", Value: e.oplog.bytes}}},
		{Key: "metrics", Value: e.metrics.section()},
	}, nil
}

func cmdStartSession(*engine, *request) (bson.D, error) {
	id := newUUID()
	return bson.D{
		{Key: "id", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: id[:]}}}},
		{Key: "timeoutMinutes", Value: int32(30)},
	}, nil
}

func cmdWhatsMyURI(_ *engine, r *request) (bson.D, error) {
	return bson.D{{Key: "you", Value: r.conn.nc.RemoteAddr().String()}}, nil
}

func cmdHostInfo(*engine, *request) (bson.D, error) {
	return bson.D{{Key: "system", Value: bson.D{{Key: "hostname", Value: "mongotest"}}}, {Key: "os", Value: bson.D{{Key: "type", Value: "mongotest"}}}}, nil
}

func cmdGetCmdLineOpts(e *engine, _ *request) (bson.D, error) {
	return bson.D{{Key: "argv", Value: bson.A{"mongotest"}}, {Key: "parsed", Value: bson.D{{Key: "replication", Value: bson.D{{Key: "replSet", Value: e.cfg.replSetName}}}}}}, nil
}

func cmdReplSetGetStatus(e *engine, r *request) (bson.D, error) {
	return bson.D{
		{Key: "set", Value: e.cfg.replSetName},
		{Key: "myState", Value: int32(1)},
		{Key: "members", Value: replSetMembers(r.conn)},
	}, nil
}

func replSetMembers(c *conn) bson.A {
	out := bson.A{}
	for i, host := range c.srv.hosts() {
		state, str := int32(1), "PRIMARY"
		if i > 0 {
			state, str = 2, "SECONDARY"
		}
		out = append(out, bson.D{
			{Key: "_id", Value: int32(i)},
			{Key: "name", Value: host},
			{Key: "health", Value: 1.0},
			{Key: "state", Value: state},
			{Key: "stateStr", Value: str},
			{Key: "self", Value: i == c.member},
		})
	}
	return out
}

func cmdListCommands(e *engine, _ *request) (bson.D, error) {
	cmds := bson.D{}
	for name, spec := range commands {
		if spec.testControl && !e.cfg.testControls {
			continue
		}
		cmds = append(cmds, bson.E{Key: name, Value: bson.D{{Key: "help", Value: ""}}})
	}
	return bson.D{{Key: "commands", Value: cmds}}, nil
}

// Generic command arguments that any command may carry.
var genericArgs = map[string]bool{
	"$db": true, "lsid": true, "$clusterTime": true, "txnNumber": true, "autocommit": true,
	"startTransaction": true, "readConcern": true, "writeConcern": true, "maxTimeMS": true,
	"comment": true, "$readPreference": true, "apiVersion": true, "apiStrict": true,
	"apiDeprecationErrors": true, "$audit": true, "$client": true, "mayBypassWriteBlocking": true,
	"maxTimeMSOpOnly": true, "readOnly": true,
}

func isGenericArg(k string) bool { return genericArgs[k] }

func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	}
	return 0, false
}
