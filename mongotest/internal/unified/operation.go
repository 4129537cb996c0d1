package unified

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// opResult is what an operation returned.
type opResult struct {
	value     bson.RawValue // Type 0: no result
	rootElems bool          // an array of documents from an iterable: each element is a root-level document
	ent       *entity       // a change stream or cursor, for saveResultAsEntity
}

// handler runs one entity operation. args is already positioned on the
// operation's arguments; a handler must read every argument it supports and
// leave the others for args.done to report. It returns the driver's error
// as is, and runner faults as *runnerError.
type handler func(tr *testRun, ctx context.Context, e *entity, args *fields) (opResult, error)

// handlers lists the operations of each entity kind.
var handlers = map[string]map[string]handler{}

// specialOps lists the testRunner operations.
var specialOps = map[string]func(tr *testRun, ctx context.Context, args *fields) error{}

// resultKinds names the entity kind an operation's result is saved as
// (saveResultAsEntity); operations not listed save a BSON value.
var resultKinds = map[string]string{
	"createChangeStream": kindChangeStream,
	"createFindCursor":   kindCursor,
}

// iterationOps are bounded by the iteration timeout, not the operation one.
var iterationOps = map[string]bool{"iterateUntilDocumentOrError": true, "iterateOnce": true}

func register(kind, name string, h handler) {
	if handlers[kind] == nil {
		handlers[kind] = map[string]handler{}
	}
	handlers[kind][name] = h
}

// SupportedOperations returns, for each entity kind ("testRunner" for the
// special operations), the names of the operations the runner implements.
func SupportedOperations() map[string][]string {
	out := map[string][]string{}
	for kind, hs := range handlers {
		for name := range hs {
			out[kind] = append(out[kind], name)
		}
	}
	for name := range specialOps {
		out["testRunner"] = append(out["testRunner"], name)
	}
	return out
}

// runOperation executes one operation and checks its expectations.
func (tr *testRun) runOperation(op Operation) error {
	timeout := tr.cfg.opTimeout
	if iterationOps[op.Name] {
		timeout = tr.cfg.iterTimeout
	}
	ctx, cancel := withTimer(tr.ctx, timeout)
	defer cancel()
	where := fmt.Sprintf("%s.%s arguments", op.Object, op.Name)

	if op.Object == "testRunner" {
		fn, ok := specialOps[op.Name]
		if !ok {
			return rerr("unified runner: operation testRunner.%s not supported", op.Name)
		}
		if op.ExpectError != nil || op.ExpectResult != nil || op.SaveResultAsEntity != "" {
			return rerr("unified runner: testRunner operations take no expectError, expectResult or saveResultAsEntity")
		}
		return fn(tr, ctx, newFields(op.Arguments, where))
	}

	e, err := tr.ents.get(op.Object)
	if err != nil {
		return asRunnerError(err)
	}
	h, ok := handlers[e.kind][op.Name]
	if !ok {
		return rerr("unified runner: operation %s not supported on a %s entity", op.Name, e.kind)
	}
	args := newFields(op.Arguments, where)
	if s := args.str("session"); s != "" {
		se, err := tr.ents.get(s, kindSession)
		if err != nil {
			return asRunnerError(err)
		}
		ctx = mongo.NewSessionContext(ctx, se.sess)
	}
	res, opErr := h(tr, ctx, e, args)
	tr.lastOpErr = opErr
	if re := isRunnerError(opErr); re != nil {
		return re
	}
	if err := args.done("argument"); err != nil {
		return asRunnerError(err)
	}
	if opErr != nil && iterationOps[op.Name] && timedOut(ctx) {
		opErr = &iterationTimeout{limit: tr.cfg.iterTimeout, err: opErr}
	}
	if res.ent != nil && op.SaveResultAsEntity == "" && res.ent.kind == kindChangeStream {
		tr.orphans = append(tr.orphans, res.ent.stream)
	}

	if op.IgnoreResultAndError {
		return nil
	}
	if op.ExpectError != nil {
		if opErr == nil {
			return fmt.Errorf("expected an error, got success (result %s)", show(res.value))
		}
		return tr.verifyError(op.ExpectError, opErr, res)
	}
	if opErr != nil {
		return &unexpectedError{err: opErr}
	}
	if op.ExpectResult != nil {
		if err := tr.verifyResult(*op.ExpectResult, res); err != nil {
			return err
		}
	}
	return tr.save(op, res, nil)
}

func isRunnerError(err error) error {
	if err == nil {
		return nil
	}
	if re, ok := err.(*runnerError); ok {
		return re
	}
	return nil
}

// verifyResult matches an operation's result against expectResult.
func (tr *testRun) verifyResult(exp bson.RawValue, res opResult) error {
	if res.ent != nil {
		return rerr("unified runner: expectResult given for an operation that returns a %s", res.ent.kind)
	}
	present := res.value.Type != 0
	if res.rootElems {
		want, ok1 := exp.ArrayOK()
		got, ok2 := res.value.ArrayOK()
		if ok1 && ok2 {
			return tr.match.matchArray("result", want, got, true)
		}
	}
	if err := tr.match.match("", exp, res.value, present, true); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	return nil
}

// save stores the result under saveResultAsEntity.
func (tr *testRun) save(op Operation, res opResult, opErr error) error {
	if op.SaveResultAsEntity == "" {
		return nil
	}
	if opErr != nil {
		return fmt.Errorf("saveResultAsEntity %s: the operation failed: %w", op.SaveResultAsEntity, opErr)
	}
	e := res.ent
	if e == nil {
		if res.value.Type == 0 {
			return rerr("saveResultAsEntity %s: the operation returned nothing", op.SaveResultAsEntity)
		}
		e = &entity{kind: kindValue, value: res.value}
	}
	return asRunnerError(tr.ents.add(op.SaveResultAsEntity, e))
}

// docResult wraps a document result.
func docResult(d bson.Raw) opResult {
	return opResult{value: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: d}}
}

// valueResult marshals a Go value as a result.
func valueResult(v any) (opResult, error) {
	t, data, err := bson.MarshalValue(v)
	if err != nil {
		return opResult{}, rerr("unified runner: converting result: %v", err)
	}
	return opResult{value: bson.RawValue{Type: t, Value: data}}, nil
}

// docsResult wraps the documents of an iterable result.
func docsResult(docs []bson.Raw) (opResult, error) {
	arr := bson.A{}
	for _, d := range docs {
		arr = append(arr, d)
	}
	r, err := valueResult(arr)
	r.rootElems = true
	return r, err
}

// iterationTimeout is the error of an iteration that got nothing in time.
// It is a client error (it wraps the driver's context error).
type iterationTimeout struct {
	limit time.Duration
	err   error
}

func (e *iterationTimeout) Error() string {
	return fmt.Sprintf("no document within the iteration limit of %s (driver: %s)", e.limit, shorten(e.err.Error()))
}

func (e *iterationTimeout) Unwrap() error { return e.err }

// unexpectedError is the failure of an operation that returned an error
// it did not expect; err is the driver's error.
type unexpectedError struct{ err error }

func (e *unexpectedError) Error() string { return "unexpected error: " + e.err.Error() }
func (e *unexpectedError) Unwrap() error { return e.err }
