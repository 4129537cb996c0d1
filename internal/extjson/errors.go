package extjson

import (
	"errors"
	"strconv"
	"strings"
)

// ErrMalformed is matched (errors.Is) by every error about the bytes of
// the document being rendered: they are not BSON the driver would accept.
// The server never sends such a document; one comes from corrupted storage
// or a bug in whatever built the bytes, so retrying cannot help.
var ErrMalformed = errors.New("malformed BSON")

// A MalformedError says where a document stops being BSON. It matches
// ErrMalformed.
type MalformedError struct {
	// Offset is the byte offset in the document where the problem is.
	Offset int
	// Field is the dotted path of the element being read ("a.b.3"; array
	// elements by index, a code-with-scope's scope as "$scope"), or "" when
	// the problem is in the outer document itself.
	Field string
	// Reason says what is wrong.
	Reason string
}

func (e *MalformedError) Error() string {
	var b strings.Builder
	b.WriteString("extjson: malformed BSON at byte ")
	b.WriteString(strconv.Itoa(e.Offset))
	if e.Field != "" {
		b.WriteString(", field ")
		b.WriteString(strconv.Quote(e.Field))
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns ErrMalformed.
func (e *MalformedError) Unwrap() error { return ErrMalformed }
