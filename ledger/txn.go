package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/ferry-io/ferry/internal/optcheck"
	"github.com/ferry-io/ferry/mongoerr"
)

var (
	// ErrRetriesExhausted marks a transaction that still failed with a
	// transient error (WriteConflict, TransientTransactionError) after
	// MaxAttempts runs; the last error is wrapped too.
	ErrRetriesExhausted = errors.New("ledger: transaction retries exhausted")
	// ErrCommitUnknown marks a commit whose outcome stayed unknown
	// (UnknownTransactionCommitResult) after MaxAttempts tries: the
	// transaction may or may not have committed. In transactional mode the
	// ledger makes a replay safe, so treat it as a failure and replay.
	ErrCommitUnknown = errors.New("ledger: transaction commit result unknown")
)

// Defaults of RunTransaction.
const (
	DefaultMaxAttempts    = 10
	DefaultBackoffInitial = 5 * time.Millisecond
	DefaultBackoffMax     = 500 * time.Millisecond
	DefaultCommitTimeout  = 10 * time.Second
)

// A TxnOption configures RunTransaction, as an Option configures New:
// RunTransaction validates the result once, before anything is sent; its
// error matches ErrInvalid and lists every problem, each naming its
// option.
type TxnOption interface{ apply(*txnConfig) }

type txnOption func(*txnConfig)

func (f txnOption) apply(c *txnConfig) { f(c) }

type txnConfig struct {
	maxAttempts   int
	initial, max  time.Duration
	commitTimeout time.Duration
	txnOpts       *options.TransactionOptionsBuilder
	onRetry       func(attempt int, err error)
}

func (c *txnConfig) validate(p *optcheck.Problems) {
	if c.maxAttempts < 1 {
		p.Add("MaxAttempts", "must be at least 1, got %d", c.maxAttempts)
	}
	if c.initial < 0 || c.max < c.initial {
		p.Add("Backoff", "need 0 <= initial <= max, got %v and %v", c.initial, c.max)
	}
	if c.commitTimeout <= 0 {
		p.Add("CommitTimeout", "must be positive, got %v", c.commitTimeout)
	}
	if c.txnOpts == nil {
		p.Add("TransactionOptions", "nil options (leave the option out for snapshot and majority)")
	}
}

// MaxAttempts bounds the runs of fn (DefaultMaxAttempts), and separately
// the commit tries of one run while the commit's outcome is unknown. It must
// be at least 1.
func MaxAttempts(n int) TxnOption { return txnOption(func(c *txnConfig) { c.maxAttempts = n }) }

// Backoff sets the wait before a retry: initial before the second attempt,
// doubling up to max, each wait drawn uniformly from [d/2, d] (jitter, so
// that conflicting transactions do not retry in lockstep). Backoff(0, 0)
// retries at once. Defaults: DefaultBackoffInitial, DefaultBackoffMax.
// It needs 0 <= initial <= max.
func Backoff(initial, max time.Duration) TxnOption {
	return txnOption(func(c *txnConfig) { c.initial, c.max = initial, max })
}

// CommitTimeout bounds one commitTransaction command (DefaultCommitTimeout;
// it must be positive). The commit does not obey the caller's context: a
// cancellation after fn returned must not turn a commit in flight into an
// unknown outcome.
func CommitTimeout(d time.Duration) TxnOption {
	return txnOption(func(c *txnConfig) { c.commitTimeout = d })
}

// TransactionOptions replaces the transaction's options (default: read
// concern "snapshot", write concern "majority").
func TransactionOptions(o *options.TransactionOptionsBuilder) TxnOption {
	return txnOption(func(c *txnConfig) { c.txnOpts = o })
}

// OnRetry registers a function called before each retry with the attempt
// that failed (from 1) and its error: for metrics and logs. A nil function
// is not called.
func OnRetry(f func(attempt int, err error)) TxnOption {
	return txnOption(func(c *txnConfig) { c.onRetry = f })
}

// RunTransaction runs fn in a transaction on a new session of client and
// commits it. fn must do all its reads and writes with the context it is
// given (a session context); the ledger, the checkpoint store and the
// handler's own writes then belong to one transaction.
//
// Retry policy:
//
//   - fn returns an error that is transient (mongoerr.IsTransientTransactionError:
//     label TransientTransactionError, or code WriteConflict 112): the
//     transaction is aborted and fn runs again in a new one, after a backoff
//     (see Backoff), at most MaxAttempts runs in all. Then the error wraps
//     ErrRetriesExhausted and fn's last error.
//   - fn returns any other error: the transaction is aborted and that error
//     is returned unchanged (the same value: == and errors.Is hold).
//   - fn returns nil but ctx is done: the transaction is aborted and ctx's
//     error returned. Nothing was committed.
//   - commit fails with the label UnknownTransactionCommitResult (and not
//     MaxTimeMSExpired): the commit alone is tried again, after a backoff,
//     at most MaxAttempts tries; the driver sends retried commits with write
//     concern majority. Then the error wraps ErrCommitUnknown.
//   - commit fails with the label TransientTransactionError (e.g.
//     NoSuchTransaction because the server aborted it): like a transient
//     error from fn, fn runs again.
//   - commit fails otherwise: returned, wrapped.
//   - ctx ending during a backoff stops the retries with ctx's error, which
//     wraps the last transient error too.
//
// The driver's own Session.WithTransaction is not used: it has no bound on
// attempts (only 120 s), and its backoff does not watch ctx.
//
// ctx must not already carry a session (fn would otherwise write outside
// the transaction it believes in); that is reported as ErrInvalid.
func RunTransaction(ctx context.Context, client *mongo.Client, fn func(sctx context.Context) error, opts ...TxnOption) error {
	cfg := txnConfig{
		maxAttempts: DefaultMaxAttempts, initial: DefaultBackoffInitial, max: DefaultBackoffMax,
		commitTimeout: DefaultCommitTimeout,
		txnOpts: options.Transaction().
			SetReadConcern(readconcern.Snapshot()).
			SetWriteConcern(writeconcern.Majority()),
	}
	var p optcheck.Problems
	if client == nil {
		p.Add("client", "nil client")
	}
	if fn == nil {
		p.Add("fn", "nil function")
	}
	if mongo.SessionFromContext(ctx) != nil {
		p.Add("ctx", "already carries a session; nested transactions are not supported")
	}
	optcheck.Apply(&p, opts, func(o TxnOption) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(ErrInvalid); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sess, err := client.StartSession()
	if err != nil {
		return fmt.Errorf("ledger: start session: %w", err)
	}
	defer func() { sess.EndSession(context.WithoutCancel(ctx)) }()

	for attempt := 1; ; attempt++ {
		err := runOnce(ctx, sess, fn, &cfg)
		var ce *commitError
		if errors.As(err, &ce) {
			// The commit failed: the transaction may still be open on the
			// server, holding its documents until
			// transactionLifetimeLimitSeconds. Abort it by killing the
			// session (the driver refuses abortTransaction after a commit);
			// a later attempt gets a new session.
			killSession(ctx, client, sess)
			sess.EndSession(context.WithoutCancel(ctx))
			if sess, err = client.StartSession(); err != nil {
				return fmt.Errorf("ledger: start session: %w", err)
			}
			err = ce.err
		}
		if err == nil || !mongoerr.IsTransientTransactionError(err) || errors.Is(err, ErrCommitUnknown) {
			return err
		}
		if attempt >= cfg.maxAttempts {
			return fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempt, err)
		}
		if cfg.onRetry != nil {
			cfg.onRetry(attempt, err)
		}
		if werr := wait(ctx, &cfg, attempt); werr != nil {
			return fmt.Errorf("ledger: transaction: %w (last attempt: %w)", werr, err)
		}
	}
}

// runOnce runs one attempt: start, fn, commit.
func runOnce(ctx context.Context, sess *mongo.Session, fn func(context.Context) error, cfg *txnConfig) error {
	if err := sess.StartTransaction(cfg.txnOpts); err != nil {
		return fmt.Errorf("ledger: start transaction: %w", err)
	}
	if err := fn(mongo.NewSessionContext(ctx, sess)); err != nil {
		abort(ctx, sess)
		return err
	}
	if err := ctx.Err(); err != nil {
		abort(ctx, sess)
		return err
	}
	for try := 1; ; try++ {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.commitTimeout)
		err := sess.CommitTransaction(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if !unknownCommitResult(err) {
			return &commitError{fmt.Errorf("ledger: commit: %w", err)}
		}
		if try >= cfg.maxAttempts {
			return &commitError{fmt.Errorf("%w after %d tries: %w", ErrCommitUnknown, try, err)}
		}
		if werr := wait(ctx, cfg, try); werr != nil {
			return &commitError{fmt.Errorf("%w: %w (last try: %w)", ErrCommitUnknown, werr, err)}
		}
	}
}

// commitError is a commit that failed: the transaction may still be open.
type commitError struct{ err error }

func (e *commitError) Error() string { return e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// killTimeout bounds the best-effort abort of a transaction whose commit
// failed.
const killTimeout = 2 * time.Second

// killSession ends the session on the server (killSessions), which aborts
// its open transaction, if any. Best effort, within killTimeout: a server
// that cannot be reached ends the transaction at
// transactionLifetimeLimitSeconds anyway. A user may kill its own
// sessions without any privilege.
func killSession(ctx context.Context, client *mongo.Client, sess *mongo.Session) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	_ = client.Database("admin").RunCommand(kctx, bson.D{{Key: "killSessions", Value: bson.A{sess.ID()}}}).Err()
}

// abort aborts the session's transaction, ignoring errors as the driver
// does: a transaction the server already aborted is gone, and an abandoned
// one ends by transactionLifetimeLimitSeconds.
func abort(ctx context.Context, sess *mongo.Session) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultCommitTimeout)
	defer cancel()
	_ = sess.AbortTransaction(actx)
}

func unknownCommitResult(err error) bool {
	var le mongo.LabeledError
	if !errors.As(err, &le) || !le.HasErrorLabel("UnknownTransactionCommitResult") {
		return false
	}
	var ce mongo.CommandError
	return !(errors.As(err, &ce) && ce.IsMaxTimeMSExpiredError())
}

// wait sleeps the backoff before retry n+1, or until ctx ends.
func wait(ctx context.Context, cfg *txnConfig, n int) error {
	d := cfg.initial
	for i := 1; i < n && d < cfg.max; i++ {
		d *= 2
	}
	d = min(d, cfg.max)
	if d <= 0 {
		return ctx.Err()
	}
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
