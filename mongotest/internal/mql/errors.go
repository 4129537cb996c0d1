package mql

import "fmt"

// Error is a MongoDB server error: the emulator replies with Code, Name
// (codeName) and Msg (errmsg).
type Error struct {
	Code int32
	Name string
	Msg  string
}

func (e *Error) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("(%s) %s", e.Name, e.Msg)
	}
	return fmt.Sprintf("(Location%d) %s", e.Code, e.Msg)
}

// Codes used by this package. Location codes (numbers without a name in
// MongoDB's error_codes.yml) carry the name "Location<code>".
const (
	CodeBadValue                   = 2
	CodeFailedToParse              = 9
	CodeTypeMismatch               = 14
	CodeOverflow                   = 15
	CodeIllegalOperation           = 20
	CodePathNotViable              = 28
	CodeConflictingUpdateOperators = 40
	CodeDollarPrefixedFieldName    = 52
	CodeNotSingleValueField        = 54
	CodeEmptyFieldName             = 56
	CodeImmutableField             = 66
	CodeInvalidOptions             = 72
	CodeInvalidPipelineOperator    = 168
	CodeLocation15983              = 15983
	CodeUnrecognizedStage          = 40324
)

var codeNames = map[int32]string{
	2:     "BadValue",
	9:     "FailedToParse",
	14:    "TypeMismatch",
	15:    "Overflow",
	20:    "IllegalOperation",
	28:    "PathNotViable",
	40:    "ConflictingUpdateOperators",
	52:    "DollarPrefixedFieldName",
	54:    "NotSingleValueField",
	56:    "EmptyFieldName",
	66:    "ImmutableField",
	72:    "InvalidOptions",
	168:   "InvalidPipelineOperator",
	17276: "Location17276",
}

// errf builds an *Error with the name that belongs to code.
func errf(code int32, format string, args ...any) *Error {
	name, ok := codeNames[code]
	if !ok {
		name = fmt.Sprintf("Location%d", code)
	}
	return &Error{Code: code, Name: name, Msg: fmt.Sprintf(format, args...)}
}

// unsupported reports a feature the emulator does not implement.
func unsupported(what string) *Error {
	return errf(CodeBadValue, "%s is not supported by mongotest", what)
}
