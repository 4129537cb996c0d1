package mongotest

import (
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Server error codes the emulator returns, named as in MongoDB's
// src/mongo/base/error_codes.yml.
const (
	codeBadValue                   = 2
	codeFailedToParse              = 9
	codeTypeMismatch               = 14
	codeIllegalOperation           = 20
	codeNamespaceNotFound          = 26
	codeIndexNotFound              = 27
	codeCursorNotFound             = 43
	codeNoMatchingDocument         = 47
	codeNamespaceExists            = 48
	codeMaxTimeMSExpired           = 50
	codeCommandNotFound            = 59
	codeInvalidOptions             = 72
	codeInvalidNamespace           = 73
	codeIndexOptionsConflict       = 85
	codeIndexKeySpecsConflict      = 86
	codeInvalidIndexSpecification  = 197
	codeInvalidResumeToken         = 260
	codeChangeStreamFatalError     = 280
	codeChangeStreamHistoryLost    = 286
	codeUnsupportedOpQueryCommand  = 352
	codeDuplicateKey               = 11000
	codeLocation40324              = 40324
	codeLocation40573              = 40573
	codeLocation40602              = 40602
	codeLocation40674              = 40674
	codeLocation50865              = 50865
	codeIDLUnknownField            = 40415
	codeOperationNotSupportedInTxn = 263
	codeWriteConflict              = 112
	codeNoSuchTransaction          = 251
)

// Codes of sessions, transactions, write concern and replica-set members.
const (
	codeSnapshotTooOld               = 239
	codeTransactionTooOld            = 225
	codeIncompleteTransactionHistory = 217
	codeUnsatisfiableWriteConcern    = 100
	codeUnknownReplWriteConcern      = 79
	codeNotWritablePrimary           = 10107
	codeNotPrimaryNoSecondaryOk      = 13435
	codeNotARetryableWriteCommand    = 50768
	codeIDLFailedToParse             = 40414
)

var codeNames = map[int32]string{
	1:       "InternalError",
	2:       "BadValue",
	6:       "HostUnreachable",
	7:       "HostNotFound",
	9:       "FailedToParse",
	11:      "UserNotFound",
	13:      "Unauthorized",
	14:      "TypeMismatch",
	18:      "AuthenticationFailed",
	20:      "IllegalOperation",
	26:      "NamespaceNotFound",
	27:      "IndexNotFound",
	40:      "ConflictingUpdateOperators",
	43:      "CursorNotFound",
	47:      "NoMatchingDocument",
	48:      "NamespaceExists",
	50:      "MaxTimeMSExpired",
	52:      "DollarPrefixedFieldName",
	59:      "CommandNotFound",
	63:      "OBSOLETE_StaleShardVersion",
	66:      "ImmutableField",
	72:      "InvalidOptions",
	73:      "InvalidNamespace",
	85:      "IndexOptionsConflict",
	86:      "IndexKeySpecsConflict",
	89:      "NetworkTimeout",
	91:      "ShutdownInProgress",
	96:      "OperationFailed",
	112:     "WriteConflict",
	121:     "DocumentValidationFailure",
	133:     "FailedToSatisfyReadPreference",
	136:     "CappedPositionLost",
	150:     "StaleEpoch",
	168:     "InvalidPipelineOperator",
	189:     "PrimarySteppedDown",
	197:     "InvalidIndexSpecificationOption",
	216:     "ElectionInProgress",
	225:     "TransactionTooOld",
	234:     "RetryChangeStream",
	237:     "CursorKilled",
	251:     "NoSuchTransaction",
	256:     "TransactionCommitted",
	260:     "InvalidResumeToken",
	262:     "ExceededTimeLimit",
	263:     "OperationNotSupportedInTransaction",
	280:     "ChangeStreamFatalError",
	286:     "ChangeStreamHistoryLost",
	352:     "UnsupportedOpQueryCommand",
	9001:    "SocketException",
	10107:   "NotWritablePrimary",
	11000:   "DuplicateKey",
	11600:   "InterruptedAtShutdown",
	11601:   "Interrupted",
	11602:   "InterruptedDueToReplStateChange",
	13388:   "StaleConfig",
	13435:   "NotPrimaryNoSecondaryOk",
	13436:   "NotPrimaryOrSecondary",
	40415:   "Location40415",
	40324:   "Location40324",
	40573:   "Location40573",
	40602:   "Location40602",
	40674:   "Location40674",
	50865:   "Location50865",
	31253:   "Location31253",
	31254:   "Location31254",
	17276:   "Location17276",
	51770:   "Location51770",
	4934000: "Location4934000",
	// Sessions, transactions, write concern.
	24:    "LockTimeout",
	64:    "WriteConcernTimeout",
	79:    "UnknownReplWriteConcern",
	100:   "UnsatisfiableWriteConcern",
	134:   "ReadConcernMajorityNotAvailableYet",
	217:   "IncompleteTransactionHistory",
	238:   "NotImplemented",
	239:   "SnapshotTooOld",
	246:   "SnapshotUnavailable",
	249:   "StaleDbVersion",
	250:   "StaleChunkHistory",
	267:   "PreparedTransactionInProgress",
	272:   "MigrationConflict",
	50768: "NotARetryableWriteCommand",
	40414: "IDLFailedToParse",
}

// codeName returns the codeName MongoDB puts beside a code.
func codeName(code int32) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return fmt.Sprintf("Location%d", code)
}

// Error categories from error_codes.yml that decide labels.
var (
	retriableCodes = map[int32]bool{6: true, 7: true, 89: true, 91: true, 134: true, 189: true, 262: true,
		358: true, 384: true, 402: true, 9001: true, 10107: true, 11600: true, 11602: true, 13435: true, 13436: true}
	networkCodes            = map[int32]bool{6: true, 7: true, 89: true, 9001: true}
	needRetargettingCodes   = map[int32]bool{150: true, 13388: true, 63: true}
	nonResumableStreamCodes = map[int32]bool{280: true, 286: true}
)

// cmdError is a server error reply: {ok: 0, errmsg, code, codeName, errorLabels?, ...extra}.
type cmdError struct {
	Code   int32
	Msg    string
	Labels []string
	// labelsSet means Labels is authoritative (a fail point gave them), even if empty.
	labelsSet bool
	Extra     bson.D
}

func (e *cmdError) Error() string { return fmt.Sprintf("(%s) %s", codeName(e.Code), e.Msg) }

func errorf(code int32, format string, args ...any) *cmdError {
	return &cmdError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// asCmdError turns any error from the engine or its helper packages into a
// server error with a code.
func asCmdError(err error) *cmdError {
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce
	}
	var me *mql.Error
	if errors.As(err, &me) {
		return &cmdError{Code: me.Code, Msg: me.Msg}
	}
	var te *resumetoken.Error
	if errors.As(err, &te) {
		return &cmdError{Code: te.Code, Msg: te.Msg}
	}
	return &cmdError{Code: 1, Msg: err.Error()}
}
