package wire

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformed is wrapped by every error about bytes that do not form a
	// valid message.
	ErrMalformed = errors.New("wire: malformed message")
	// ErrTooLarge is wrapped by the error ReadMessage returns for a message
	// whose declared length exceeds the allowed maximum.
	ErrTooLarge = errors.New("wire: message too large")
	// ErrUnsupported is wrapped by errors about well-formed messages that use
	// a feature this package does not implement (e.g. snappy compression).
	ErrUnsupported = errors.New("wire: unsupported")
)

// Server error codes a real mongod uses for OP_MSG malformations
// (src/mongo/rpc/op_msg.cpp, src/mongo/base/error_codes.yml).
const (
	CodeIllegalOpMsgFlag          int32 = 223
	CodeMultipleBodySections      int32 = 40430
	CodeDuplicateDocumentSequence int32 = 40431
	CodeUnknownSectionKind        int32 = 40432
	CodeDuplicateBodyField        int32 = 40433
	CodeMissingBody               int32 = 40587
	CodeChecksumMessageTooSmall   int32 = 51251
)

// Error describes why a message was rejected. Code is the error code a real
// server reports for the same malformation, or 0 when it has no specific one.
// errors.Is(err, ErrMalformed) (or ErrTooLarge, ErrUnsupported) reports the
// error's class.
type Error struct {
	Code int32
	Msg  string
	kind error
}

func (e *Error) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("%v: %s (code %d)", e.kind, e.Msg, e.Code)
	}
	return fmt.Sprintf("%v: %s", e.kind, e.Msg)
}

// Unwrap returns ErrMalformed, ErrTooLarge or ErrUnsupported.
func (e *Error) Unwrap() error { return e.kind }

func malformed(code int32, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), kind: ErrMalformed}
}

func unsupported(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), kind: ErrUnsupported}
}
