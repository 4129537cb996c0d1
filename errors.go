package ferry

import (
	"errors"
	"strings"

	"github.com/ferry-io/ferry/checkpoint"
)

// Errors returned by Run, to check with errors.Is.
var (
	// ErrFenced: another owner (a higher lease epoch) wrote the checkpoint;
	// this consumer stopped without further effects.
	ErrFenced = checkpoint.ErrFenced
	// ErrHistoryLost: the checkpoint's resume token is no longer in the
	// oplog and the policy is HistoryLostFail. The checkpoint is marked
	// needs-backfill.
	ErrHistoryLost = errors.New("ferry: resume point no longer in the oplog")
	// ErrInvalidated: the stream was invalidated (drop, rename,
	// dropDatabase) and the policy is InvalidateStop.
	ErrInvalidated = errors.New("ferry: stream invalidated")
	// ErrIdentityChanged: the stream's definition (scope, pipeline,
	// options, partition count) differs from the one that wrote the
	// checkpoint.
	ErrIdentityChanged = errors.New("ferry: stream definition changed")
	// ErrStalled: a poison event stopped the partition (PoisonStall).
	ErrStalled = errors.New("ferry: partition stalled on a poison event")
	// ErrPermanent marks a handler error that retrying cannot fix: the
	// event goes straight to the poison policy. Wrap it with Permanent.
	ErrPermanent = errors.New("ferry: permanent failure")
	// ErrTransient marks a handler error as the destination's failure, not
	// the event's: the database, broker or service the handler writes to
	// is unavailable, overloaded or slow. Wrap it with Transient. Such a
	// failure is retried as a possible outage: it counts towards
	// MaxAttempts only while the destination accepts other events, so an
	// outage dead-letters nothing however long it lasts (see Retry).
	// Network errors, timeouts and MongoDB's transient errors are
	// recognised without the mark; package sink marks every retryable
	// failure of its sinks (sink.ErrRetryable is this error). Any other
	// handler error is the handler's own and counts every time.
	ErrTransient = errors.New("ferry: transient failure")
	// ErrStopPartition, wrapped in a handler's error (see StopPartition),
	// stops the partition at once: the event is neither retried, nor
	// dead-lettered, nor finished, so the checkpoint stays before it and
	// the next owner applies it. Consumer groups use it when the lease can
	// no longer be proven valid.
	ErrStopPartition = errors.New("ferry: partition stopped by the handler")
	// ErrNotAttempted marks the failure of an event of a batch that was
	// not applied because of another event of the batch, not because of
	// itself: an earlier event of the same document failed (the sink did
	// not try it, to keep the document's order), or a transaction holding
	// the whole batch was aborted by another event's failure; or, from a
	// Handler of one event, that the event was not tried for a reason
	// outside it (a webhook receiver answering that another delivery of
	// the same event is in progress). It says nothing about the event, so
	// it is retried and the attempt does not count towards MaxAttempts
	// (RetryMaxElapsed still bounds it). Wrap it (fmt.Errorf with %w) to
	// say why.
	ErrNotAttempted = errors.New("ferry: not attempted")
	// ErrFatal: the server refused the stream with an error that reopening
	// it cannot fix (a pipeline that modifies _id, a required pre- or
	// post-image that does not exist, missing privileges, an event too
	// large to return, ...). The server's error is wrapped; see AsFailure
	// for its class and whether it can clear.
	ErrFatal = errors.New("ferry: fatal change stream error")
	// ErrStartPosition: the start position cannot be resolved (see
	// StartAtCheckpointsOf).
	ErrStartPosition = errors.New("ferry: start position cannot be resolved")
	// ErrAlreadyRunning: Run was called while another Run of the same
	// Consumer had not returned. Run refuses at once and changes nothing;
	// call Run again once the first returned, or make one Consumer per
	// concurrent Run (each its own partition).
	ErrAlreadyRunning = errors.New("ferry: Run called while the consumer is already running")
	// ErrCorruptCheckpoint: the stored checkpoint record cannot be read
	// (it is checkpoint.ErrCorrupt). Nothing is resumed from it.
	ErrCorruptCheckpoint = checkpoint.ErrCorrupt
)

// Transient wraps err to say the failure is the destination's, not the
// event's (see ErrTransient).
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }

func (e *transientError) Unwrap() []error { return []error{e.err, ErrTransient} }

func (e *transientError) Is(target error) bool { return target == ErrTransient }

// StopPartition wraps err so that Ferry stops the partition (see
// ErrStopPartition).
func StopPartition(err error) error { return &stopPartitionError{err} }

type stopPartitionError struct{ err error }

func (e *stopPartitionError) Error() string { return e.err.Error() }

func (e *stopPartitionError) Unwrap() []error { return []error{e.err, ErrStopPartition} }

func (e *stopPartitionError) Is(target error) bool { return target == ErrStopPartition }

// Permanent wraps err so that Ferry does not retry it.
func Permanent(err error) error { return &permanentError{err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }

func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

func (e *permanentError) Is(target error) bool { return target == ErrPermanent }

// ConfigError lists every problem found in a consumer's options.
type ConfigError struct{ Problems []string }

func (e *ConfigError) Error() string {
	return "ferry: invalid configuration:\n  " + strings.Join(e.Problems, "\n  ")
}

// stopError carries a reason Run stopped, with a message for operators.
type stopError struct {
	kind error
	msg  string // what happened and what to do, in the library's terms
	err  error
	// detail says what happened without advice (Failure.Detail); empty:
	// msg is used.
	detail string
	// clears: the condition can clear without a change of configuration
	// (Failure.Clears), where the kind alone does not decide it.
	clears bool
}

func (e *stopError) Error() string { return e.msg }

func (e *stopError) Unwrap() []error {
	if e.err != nil {
		return []error{e.kind, e.err}
	}
	return []error{e.kind}
}
