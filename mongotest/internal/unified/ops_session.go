package unified

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/session"
)

// Session operations, and the testRunner operations that check sessions.

func init() {
	register(kindSession, "startTransaction", opStartTransaction)
	register(kindSession, "commitTransaction", opCommitTransaction)
	register(kindSession, "abortTransaction", opAbortTransaction)
	register(kindSession, "endSession", opEndSession)
	register(kindSession, "withTransaction", opWithTransaction)
	register(kindSession, "getSnapshotTime", opGetSnapshotTime)
	specialOps["assertSessionTransactionState"] = opAssertTransactionState
	specialOps["assertSessionPinned"] = opAssertPinned(true)
	specialOps["assertSessionUnpinned"] = opAssertPinned(false)
	specialOps["assertSessionDirty"] = opAssertDirty(true)
	specialOps["assertSessionNotDirty"] = opAssertDirty(false)
	specialOps["assertSameLsidOnLastTwoCommands"] = opAssertLastTwoLsids(true)
	specialOps["assertDifferentLsidOnLastTwoCommands"] = opAssertLastTwoLsids(false)
	specialOps["targetedFailPoint"] = opTargetedFailPoint
}

// transactionArgs reads the transaction options of startTransaction and
// withTransaction; nil when none is given.
func transactionArgs(a *fields, where string) (*options.TransactionOptionsBuilder, error) {
	d := bson.D{}
	for _, k := range []string{"readConcern", "readPreference", "writeConcern", "maxCommitTimeMS"} {
		if v, ok := a.value(k); ok {
			d = append(d, bson.E{Key: k, Value: v})
		}
	}
	if len(d) == 0 {
		return nil, nil
	}
	raw, err := bson.Marshal(d)
	if err != nil {
		return nil, rerr("unified runner: %v", err)
	}
	to, err := parseTransactionOptions(raw, where)
	if err != nil {
		return nil, asRunnerError(err)
	}
	return to, nil
}

func opStartTransaction(_ *testRun, _ context.Context, e *entity, a *fields) (opResult, error) {
	to, err := transactionArgs(a, "startTransaction")
	if err != nil {
		return opResult{}, err
	}
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if to == nil {
		return opResult{}, e.sess.StartTransaction()
	}
	return opResult{}, e.sess.StartTransaction(to)
}

func opCommitTransaction(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	return opResult{}, e.sess.CommitTransaction(ctx)
}

func opAbortTransaction(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	return opResult{}, e.sess.AbortTransaction(ctx)
}

func opEndSession(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	e.sess.EndSession(ctx)
	return opResult{}, nil
}

// callbackFailure is a withTransaction callback operation that did not
// do what the test expects: the test fails, whatever withTransaction
// expects.
type callbackFailure struct{ err error }

func (e *callbackFailure) Error() string { return "callback: " + e.err.Error() }
func (e *callbackFailure) Unwrap() error { return e.err }

// opWithTransaction runs the driver's convenient transaction API with the
// callback's operations. As the unified format requires, every error an
// operation of the callback returns is passed on to withTransaction, which
// retries or aborts as the specification says, whether or not the
// operation expected it; each operation's own expectations are checked
// too, and the first one that fails fails the test.
func opWithTransaction(tr *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	var ops []Operation
	for i, d := range a.docs("callback") {
		op, err := parseOperation(d, fmt.Sprintf("withTransaction callback[%d]", i))
		if err != nil {
			return opResult{}, asRunnerError(err)
		}
		ops = append(ops, op)
	}
	if !a.has("callback") {
		a.fail("callback is required")
	}
	to, err := transactionArgs(a, "withTransaction")
	if err != nil {
		return opResult{}, err
	}
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	var failure error
	callback := func(context.Context) (any, error) {
		for i, op := range ops {
			tr.lastOpErr = nil
			if err := tr.runOperation(op); err != nil {
				var ue *unexpectedError
				if failure == nil {
					failure = fmt.Errorf("callback[%d] %s.%s: %w", i, op.Object, op.Name, err)
				}
				if errors.As(err, &ue) && isRunnerError(err) == nil {
					return nil, ue.err
				}
				return nil, &callbackFailure{failure}
			}
			if tr.lastOpErr != nil {
				return nil, tr.lastOpErr
			}
		}
		return nil, nil
	}
	var opts []options.Lister[options.TransactionOptions]
	if to != nil {
		opts = append(opts, to)
	}
	_, err = e.sess.WithTransaction(ctx, callback, opts...)
	if failure != nil {
		if _, ok := asDriverLimit(failure); ok || isRunnerError(errors.Unwrap(failure)) != nil {
			return opResult{}, asRunnerError(failure)
		}
		return opResult{}, &runnerError{&callbackFailure{failure}}
	}
	return opResult{}, err
}

func opGetSnapshotTime(_ *testRun, _ context.Context, e *entity, a *fields) (opResult, error) {
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	return valueResult(e.sess.SnapshotTime())
}

// resolveSnapshotTime applies a session entity's sessionOptions.snapshotTime,
// which names an entity holding a timestamp.
func (tr *testRun) resolveSnapshotTime(e EntityDef, opts *options.SessionOptionsBuilder) error {
	so, err := e.Spec.LookupErr("sessionOptions")
	if err != nil {
		return nil
	}
	name, ok := so.Document().Lookup("snapshotTime").StringValueOK()
	if !ok {
		return nil
	}
	v, err := tr.ents.bsonValue(name)
	if err != nil {
		return fmt.Errorf("sessionOptions.snapshotTime: %w", err)
	}
	t, i, ok := v.TimestampOK()
	if !ok {
		return fmt.Errorf("sessionOptions.snapshotTime: entity %q is a %s, not a timestamp", name, v.Type)
	}
	opts.SetSnapshotTime(bson.Timestamp{T: t, I: i})
	return nil
}

// sessionArg returns the driver state of the session named by the
// "session" argument.
func (tr *testRun) sessionArg(a *fields) (*session.Client, error) {
	id := a.reqStr("session")
	if err := a.ready(); err != nil {
		return nil, err
	}
	e, err := tr.ents.get(id, kindSession)
	if err != nil {
		return nil, asRunnerError(err)
	}
	return driverSession(e.sess)
}

var transactionStates = map[string]session.TransactionState{
	"none": session.None, "starting": session.Starting, "in_progress": session.InProgress,
	"committed": session.Committed, "aborted": session.Aborted,
}

func opAssertTransactionState(tr *testRun, _ context.Context, a *fields) error {
	want := a.reqStr("state")
	cs, err := tr.sessionArg(a)
	if err != nil {
		return err
	}
	state, ok := transactionStates[want]
	if !ok {
		return rerr("unified runner: assertSessionTransactionState: unknown state %q", want)
	}
	if cs.TransactionState != state {
		return fmt.Errorf("session transaction state: expected %s, got %s", want, cs.TransactionState)
	}
	return nil
}

func opAssertPinned(pinned bool) func(*testRun, context.Context, *fields) error {
	return func(tr *testRun, _ context.Context, a *fields) error {
		cs, err := tr.sessionArg(a)
		if err != nil {
			return err
		}
		if got := cs.PinnedServerAddr != nil; got != pinned {
			return fmt.Errorf("session pinned: expected %v, got %v", pinned, got)
		}
		return nil
	}
}

func opAssertDirty(dirty bool) func(*testRun, context.Context, *fields) error {
	return func(tr *testRun, _ context.Context, a *fields) error {
		cs, err := tr.sessionArg(a)
		if err != nil {
			return err
		}
		got := cs.Server != nil && cs.Server.Dirty
		if got != dirty {
			return fmt.Errorf("session dirty: expected %v, got %v", dirty, got)
		}
		return nil
	}
}

// opAssertLastTwoLsids compares the lsids of the last two commands a
// client's command monitor saw start.
func opAssertLastTwoLsids(same bool) func(*testRun, context.Context, *fields) error {
	return func(tr *testRun, _ context.Context, a *fields) error {
		id := a.reqStr("client")
		if err := a.ready(); err != nil {
			return err
		}
		ce, err := tr.ents.get(id, kindClient)
		if err != nil {
			return asRunnerError(err)
		}
		var started []observedEvent
		for _, ev := range ce.client.log.snapshot() {
			if ev.kind == cmdStarted {
				started = append(started, ev)
			}
		}
		if len(started) < 2 {
			return fmt.Errorf("client %s: %d commands observed, need two (observeEvents must list commandStartedEvent)", id, len(started))
		}
		last := started[len(started)-2:]
		var lsids [2]bson.RawValue
		for i, ev := range last {
			v, err := ev.command.LookupErr("lsid")
			if err != nil {
				return fmt.Errorf("command %s has no lsid", ev.commandName)
			}
			lsids[i] = v
		}
		if got := lsids[0].Equal(lsids[1]); got != same {
			return fmt.Errorf("lsids of the last two commands (%s, %s): expected same=%v, got %s and %s",
				last[0].commandName, last[1].commandName, same, show(lsids[0]), show(lsids[1]))
		}
		return nil
	}
}

// opTargetedFailPoint sets a fail point on the server a session is pinned
// to (a mongos); sessions are never pinned on a replica set.
func opTargetedFailPoint(tr *testRun, ctx context.Context, a *fields) error {
	fp := a.reqDoc("failPoint")
	cs, err := tr.sessionArg(a)
	if err != nil {
		return err
	}
	if cs.PinnedServerAddr == nil {
		return fmt.Errorf("targetedFailPoint: session %s is not pinned to a server", a.str("session"))
	}
	name := lookupString(fp, "configureFailPoint")
	host := cs.PinnedServerAddr.String()
	client, err := mongo.Connect(options.Client().SetHosts([]string{host}).SetDirect(true))
	if err != nil {
		return fmt.Errorf("targetedFailPoint: connecting to %s: %w", host, err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	if err := client.Database("admin").RunCommand(ctx, fp, options.RunCmd().SetReadPreference(readpref.Primary())).Err(); err != nil {
		return fmt.Errorf("targetedFailPoint %s on %s: %w", name, host, err)
	}
	tr.failPoints = append(tr.failPoints, failPointRecord{name: name, host: host})
	return nil
}
