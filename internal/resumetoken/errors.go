package resumetoken

import "fmt"

// Error is a resume-token parse or validation error. Code is the error code a
// real server returns for the same malformation (src/mongo/db/pipeline/
// resume_token.cpp and the KeyString decoder), so the emulator can answer
// with it unchanged.
type Error struct {
	Code int32
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Msg, e.Code) }

// Codes used by this package. Names follow src/mongo/base/error_codes.yml;
// the numeric-only ones are the server's assertion ids.
const (
	CodeFailedToParse int32 = 9   // bad hex, undecodable values
	codeOverflow      int32 = 15  // truncated KeyString / type bits (BufReader)
	CodeInvalidUUID   int32 = 207 // UUID slot holds something other than BinData(4) of 16 bytes
	codeUnsupported   int32 = 9   // values this package cannot encode or decode (decimal continuations)
)

func newErr(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ksErr is a KeyString format error, worded like the server's.
func ksErr(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: "KeyString format error: " + fmt.Sprintf(format, args...)}
}
