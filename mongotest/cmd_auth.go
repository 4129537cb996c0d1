package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// cmdAuthFailed answers the authentication commands (saslStart,
// saslContinue, authenticate). The emulator has no users: it answers as a
// MongoDB server that does not know the user, AuthenticationFailed (18)
// with the server's message, which names neither the user nor the reason
// (a server logs UserNotFound, and never tells the client). A client with
// credentials therefore fails its handshake as it would against a server
// with a wrong user name or password.
func cmdAuthFailed(*engine, *request) (bson.D, error) {
	return nil, errorf(mongoerr.CodeAuthenticationFailed, "Authentication failed.")
}
