package ferry

import (
	"errors"
	"strings"

	"github.com/ferry-io/ferry/mongoerr"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// FailureClass names why a consumer cannot go on. The values are stable:
// they label metrics and appear in status output.
type FailureClass string

// The failure classes.
const (
	// FailIdentityChanged: the stream's definition differs from the one
	// that wrote the checkpoint (ErrIdentityChanged). Clears only with a
	// change of configuration.
	FailIdentityChanged FailureClass = "identity-changed"
	// FailHistoryLost: the resume point is no longer in the oplog and the
	// policy is HistoryLostFail (ErrHistoryLost). Clears only with a
	// change of configuration (a backfill) or an explicit reset.
	FailHistoryLost FailureClass = "history-lost"
	// FailInvalidated: the stream was invalidated and the policy is
	// InvalidateStop (ErrInvalidated).
	FailInvalidated FailureClass = "invalidated"
	// FailStalled: a poison event stopped the partition under PoisonStall
	// (ErrStalled). It can clear: the sink may accept the event later.
	FailStalled FailureClass = "stalled"
	// FailIDModified: the pipeline modifies or removes the events' _id,
	// so no resume token can be recorded (ChangeStreamFatalError, 280).
	FailIDModified FailureClass = "id-modified"
	// FailImageMissing: the stream requires a pre- or post-image
	// (full_document_before_change or full_document "required") that does
	// not exist, usually because changeStreamPreAndPostImages was not
	// enabled on the collection when the change was made
	// (NoMatchingDocument, 47; 51770 when no image was ever recorded). It
	// does not clear by itself: enabling images later gives only later
	// changes an image, so the stream must move past this change (a
	// position set after it) or stop requiring images.
	FailImageMissing FailureClass = "image-missing"
	// FailUnauthorized: the user lacks a privilege the stream needs
	// (Unauthorized, 13; AuthenticationFailed, 18). It can clear.
	FailUnauthorized FailureClass = "unauthorized"
	// FailEventTooLarge: an event is larger than the server can return
	// (BSONObjectTooLarge, 10334). The event stays in the oplog, so only a
	// change of the stream's definition gets past it.
	FailEventTooLarge FailureClass = "event-too-large"
	// FailCorruptCheckpoint: the stored checkpoint record cannot be read
	// (ErrCorruptCheckpoint).
	FailCorruptCheckpoint FailureClass = "corrupt-checkpoint"
	// FailServer: any other server error that reopening the stream cannot
	// fix (ErrFatal).
	FailServer FailureClass = "server-error"
	// FailConfig: the consumer's options are invalid (*ConfigError).
	FailConfig FailureClass = "invalid-configuration"
	// FailStartPosition: the start position cannot be resolved, for
	// instance StartAtCheckpointsOf a stream that has no checkpoints
	// (ErrStartPosition).
	FailStartPosition FailureClass = "start-position"
)

// Failure describes why Run stopped when retrying at once cannot help:
// whoever runs the consumer (a group member, the daemon) stops taking the
// stream, reports the failure, and tries again only with backoff, and only
// when Clears says the condition can go away by itself.
type Failure struct {
	Class FailureClass
	// Clears reports whether the condition can clear without a change of
	// configuration (pre-images enabled, a privilege granted, the sink
	// fixed): worth re-checking with backoff. When false, only a new
	// configuration (or an explicit reset) ends it.
	Clears bool
	// Detail says what happened, without the library's advice on what to
	// do, for tools that give advice in their own terms. Resume tokens the
	// server quoted are shortened (RedactTokens).
	Detail string
	// Err is the error Run returned.
	Err error
}

// AsFailure reports whether err, returned by Consumer.Run, is a failure
// and which. It returns false for nil, for a cancelled context, for
// ErrFenced and ErrStopPartition (another owner took over: a normal
// hand-off) and for transient errors (a checkpoint write or load that
// failed on the network), which are worth retrying soon, with backoff.
// MongoDB refusing credentials (AuthenticationFailed) or a privilege
// (Unauthorized) is FailUnauthorized wherever it was met, not only when
// opening the stream.
func AsFailure(err error) (Failure, bool) {
	if err == nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrStopPartition) {
		return Failure{}, false
	}
	f := Failure{Err: err, Detail: RedactTokens(err.Error())}
	var se *stopError
	if errors.As(err, &se) && se.detail != "" {
		f.Detail = RedactTokens(se.detail)
	}
	var ce *ConfigError
	switch {
	case errors.As(err, &ce):
		f.Class = FailConfig
	case errors.Is(err, ErrStartPosition):
		f.Class = FailStartPosition
	case errors.Is(err, ErrIdentityChanged):
		f.Class = FailIdentityChanged
	case errors.Is(err, ErrHistoryLost):
		f.Class = FailHistoryLost
		f.Clears = se != nil && se.clears
	case errors.Is(err, ErrInvalidated):
		f.Class = FailInvalidated
	case errors.Is(err, ErrStalled):
		f.Class, f.Clears = FailStalled, true
	case errors.Is(err, ErrCorruptCheckpoint):
		f.Class = FailCorruptCheckpoint
	case errors.Is(err, ErrFatal):
		f.Class, f.Clears = serverFailure(err)
	case mongoerr.IsAuthFailure(err):
		// Credentials refused or a privilege missing, wherever it was met
		// (the source's version, a checkpoint, a group's start): a retry
		// at once cannot help; a changed user or role can.
		f.Class, f.Clears = FailUnauthorized, true
	default:
		return Failure{}, false
	}
	return f, true
}

// serverFailure classifies a fatal server error.
func serverFailure(err error) (FailureClass, bool) {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return FailServer, true
	}
	switch {
	case se.HasErrorCode(mongoerr.CodeChangeStreamFatalError) && strings.Contains(err.Error(), "_id"):
		return FailIDModified, false
	case se.HasErrorCode(mongoerr.CodeNoMatchingDocument), se.HasErrorCode(mongoerr.CodeNoPreImageID):
		return FailImageMissing, false
	case se.HasErrorCode(mongoerr.CodeUnauthorized), se.HasErrorCode(mongoerr.CodeAuthenticationFailed):
		return FailUnauthorized, true
	case se.HasErrorCode(mongoerr.CodeBSONObjectTooLarge):
		return FailEventTooLarge, false
	case se.HasErrorCode(mongoerr.CodeChangeStreamFatalError):
		return FailServer, false
	}
	return FailServer, true
}
