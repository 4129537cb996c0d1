package mongoerr

import (
	"errors"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// badTokenCodes are the assertion codes a server raises when it cannot
// decode the resume token a change stream was opened with
// (resumeAfter/startAfter): _data missing or not a string, _typeBits of
// the wrong type, an empty or oversized token, a version, token type,
// txnOpIndex, fromInvalidate, UUID, eventIdentifier or fragmentNum that
// is missing, of the wrong type or out of range. Bad hex and undecodable
// KeyString values are FailedToParse (9), and a truncated one Overflow
// (15): codes other errors share, so IsBadResumeToken does not count them.
var badTokenCodes = map[int]bool{
	40646: true, 40647: true, 40648: true, 40649: true,
	50788: true, 50793: true, 50794: true, 50795: true, 50796: true, 50854: true, 50855: true, 50870: true, 50872: true,
	51055: true, 51056: true, 51057: true,
	6189500: true, 6189501: true, 6189502: true, 6189503: true, 6189504: true, 6189505: true,
	7182501: true, 7182504: true,
}

// IsBadResumeToken reports whether err is a server's refusal of a resume
// token it cannot decode (one of the codes it raises only for that). A
// token that decodes but names no event the server has is not one: that is
// ChangeStreamFatalError (280) or ChangeStreamHistoryLost (286).
func IsBadResumeToken(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	for code := range badTokenCodes {
		if se.HasErrorCode(code) {
			return true
		}
	}
	return false
}

// IsAuthFailure reports whether err is MongoDB refusing the client's
// credentials (AuthenticationFailed, 18, whether the handshake or a
// command got it) or a privilege it lacks (Unauthorized, 13): neither
// clears by retrying at once, only by a change of credentials or roles.
func IsAuthFailure(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	return se.HasErrorCode(CodeAuthenticationFailed) || se.HasErrorCode(CodeUnauthorized)
}
