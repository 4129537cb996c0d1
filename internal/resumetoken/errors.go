package resumetoken

import (
	"fmt"

	"github.com/ferry-io/ferry/mongoerr"
)

// Error is a resume-token parse or validation error. Code is the error code a
// real server returns for the same malformation (src/mongo/db/pipeline/
// resume_token.cpp and the KeyString decoder), so the emulator can answer
// with it unchanged.
type Error struct {
	Code int32
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Msg, e.Code) }

// The codes this package returns are mongoerr's: CodeFailedToParse (bad
// hex, undecodable values), CodeOverflow (a truncated KeyString or type
// bits, as the server's BufReader reports) and CodeInvalidUUID (the UUID
// slot holds something other than BinData(4) of 16 bytes).

// codeUnsupported is the code of values this package cannot encode or
// decode (decimal continuations).
const codeUnsupported = mongoerr.CodeFailedToParse

func newErr(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ksErr is a KeyString format error, worded like the server's.
func ksErr(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: "KeyString format error: " + fmt.Sprintf(format, args...)}
}
