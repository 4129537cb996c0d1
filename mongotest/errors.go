package mongotest

import (
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// The emulator's error codes and their codeNames are mongoerr's (one list
// for Ferry): mongoerr.CodeX where a code has a name, the number where it is
// an assertion's location id, and mongoerr.Name beside it in every reply.

// Error categories from error_codes.yml that decide labels.
var (
	retriableCodes = map[int32]bool{
		mongoerr.CodeHostUnreachable: true, mongoerr.CodeHostNotFound: true, mongoerr.CodeNetworkTimeout: true,
		mongoerr.CodeShutdownInProgress: true, mongoerr.CodeReadConcernMajorityNotAvailableYet: true,
		mongoerr.CodePrimarySteppedDown: true, mongoerr.CodeExceededTimeLimit: true,
		mongoerr.CodeInternalTransactionNotSupported: true, mongoerr.CodeConnectionError: true,
		mongoerr.CodeResourceExhausted: true, mongoerr.CodeSocketException: true, mongoerr.CodeNotWritablePrimary: true,
		mongoerr.CodeInterruptedAtShutdown: true, mongoerr.CodeInterruptedDueToReplStateChange: true,
		mongoerr.CodeNotPrimaryNoSecondaryOk: true, mongoerr.CodeNotPrimaryOrSecondary: true,
	}
	networkCodes = map[int32]bool{
		mongoerr.CodeHostUnreachable: true, mongoerr.CodeHostNotFound: true, mongoerr.CodeNetworkTimeout: true,
		mongoerr.CodeSocketException: true,
	}
	needRetargettingCodes = map[int32]bool{
		mongoerr.CodeStaleEpoch: true, mongoerr.CodeStaleConfig: true, mongoerr.CodeStaleShardVersion: true,
	}
	nonResumableStreamCodes = map[int32]bool{
		mongoerr.CodeChangeStreamFatalError: true, mongoerr.CodeChangeStreamHistoryLost: true,
	}
)

// cmdError is a server error reply: {ok: 0, errmsg, code, codeName, errorLabels?, ...extra}.
type cmdError struct {
	Code   int32
	Msg    string
	Labels []string
	// labelsSet means Labels is authoritative (a fail point gave them), even if empty.
	labelsSet bool
	Extra     bson.D
	// CodeName, when set, is the reply's codeName instead of
	// mongoerr.Name(Code): for errors of a code Atlas's proxy gives, not
	// the server.
	CodeName string
}

func (e *cmdError) Error() string { return fmt.Sprintf("(%s) %s", e.codeName(), e.Msg) }

func (e *cmdError) codeName() string {
	if e.CodeName != "" {
		return e.CodeName
	}
	return mongoerr.Name(e.Code)
}

// codeAtlasError is the code of the errors Atlas's proxy answers for what
// a shared-tier cluster does not allow.
const codeAtlasError = 8000

// atlasRefusal is the error an Atlas shared-tier cluster answers for what
// it does not allow (AtlasSharedTier), as the Atlas documentation gives
// it ("Unsupported Commands in Atlas").
func atlasRefusal(what string) *cmdError {
	return &cmdError{Code: codeAtlasError, CodeName: "AtlasError",
		Msg: what + " is not allowed or the syntax is incorrect, see the Atlas documentation for more information."}
}

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
	return &cmdError{Code: mongoerr.CodeInternalError, Msg: err.Error()}
}
