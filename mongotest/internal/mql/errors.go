package mql

import (
	"fmt"

	"github.com/ferry-io/ferry/mongoerr"
)

// Error is a MongoDB server error: the emulator replies with Code, its
// codeName (mongoerr.Name) and Msg (errmsg). Codes with a name are
// mongoerr's constants; the others are the server's assertion ids, written
// as numbers where they are raised.
type Error struct {
	Code int32
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("(%s) %s", mongoerr.Name(e.Code), e.Msg) }

// errf builds an *Error.
func errf(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// unsupported reports a feature the emulator does not implement.
func unsupported(what string) *Error {
	return errf(mongoerr.CodeBadValue, "%s is not supported by mongotest", what)
}
