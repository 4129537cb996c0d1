package mongotest

import (
	"sort"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// saslState is a connection's SCRAM conversation in progress.
type saslState struct {
	conv      *scram.ServerConversation
	db        string
	skipEmpty bool // the client asked for options.skipEmptyExchange
	finished  bool // the server-final message was sent without done
}

// errAuthFailed is what a server answers for every failed authentication:
// AuthenticationFailed (18) with a message that names neither the user
// nor the reason (the server logs UserNotFound or the bad proof, and never
// tells the client). Without users (authorization off) every attempt gets
// it, as against a server that does not know the user.
func errAuthFailed() error {
	return errorf(mongoerr.CodeAuthenticationFailed, "Authentication failed.")
}

// cmdSaslStart begins a SCRAM-SHA-256 conversation:
// {saslStart: 1, mechanism, payload: <client-first>, options?} →
// {conversationId: 1, done: false, payload: <server-first>}.
func cmdSaslStart(e *engine, r *request) (bson.D, error) {
	if !e.authOn() || r.conn == nil {
		return nil, errAuthFailed()
	}
	if mech, _ := r.arg("mechanism"); mech != "SCRAM-SHA-256" {
		return nil, errorf(mongoerr.CodeMechanismUnavailable, "Received authentication for mechanism %v which is not enabled", mech)
	}
	payload, ok := binaryArg(r, "payload")
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'saslStart.payload' is the wrong type, expected type 'binData'")
	}
	db := r.db
	server, err := scram.SHA256.NewServer(func(name string) (scram.StoredCredentials, error) {
		if u := e.users[db+"."+name]; u != nil {
			return u.creds, nil
		}
		return scram.StoredCredentials{}, errAuthFailed()
	})
	if err != nil {
		return nil, errAuthFailed()
	}
	st := &saslState{conv: server.NewConversation(), db: db}
	if v, ok := r.arg("options"); ok {
		if d, ok := v.(bson.D); ok {
			st.skipEmpty = mql.Truthy(lookupD(d, "skipEmptyExchange"))
		}
	}
	r.conn.sasl = nil
	out, err := st.conv.Step(string(payload))
	if err != nil {
		return nil, errAuthFailed()
	}
	r.conn.sasl = st
	return saslReply(false, out), nil
}

// cmdSaslContinue goes on with the conversation: the client-final message
// gets the server-final one; once the proof checks out the connection is
// the user's. Without skipEmptyExchange, an empty last round ends it.
func cmdSaslContinue(e *engine, r *request) (bson.D, error) {
	st := r.conn.saslConv()
	if st == nil {
		return nil, errorf(mongoerr.CodeProtocolError, "No SASL session state found")
	}
	if st.finished {
		r.conn.sasl = nil
		return saslReply(true, ""), nil
	}
	payload, ok := binaryArg(r, "payload")
	if !ok {
		r.conn.sasl = nil
		return nil, errAuthFailed()
	}
	out, err := st.conv.Step(string(payload))
	if err != nil || !st.conv.Valid() {
		r.conn.sasl = nil
		return nil, errAuthFailed()
	}
	r.conn.user = e.users[st.db+"."+st.conv.Username()]
	if st.skipEmpty {
		r.conn.sasl = nil
		return saslReply(true, out), nil
	}
	st.finished = true
	return saslReply(false, out), nil
}

func saslReply(done bool, payload string) bson.D {
	return bson.D{
		{Key: "conversationId", Value: int32(1)},
		{Key: "done", Value: done},
		{Key: "payload", Value: bson.Binary{Data: []byte(payload)}},
	}
}

func binaryArg(r *request, key string) ([]byte, bool) {
	v, _ := r.arg(key)
	b, ok := v.(bson.Binary)
	return b.Data, ok
}

// cmdAuthenticate is the legacy authenticate command (MONGODB-CR,
// X.509): no user of the emulator authenticates that way.
func cmdAuthenticate(*engine, *request) (bson.D, error) { return nil, errAuthFailed() }

// cmdLogout forgets the connection's user.
func cmdLogout(_ *engine, r *request) (bson.D, error) {
	if r.conn != nil {
		r.conn.user = nil
	}
	return bson.D{}, nil
}

// cmdConnectionStatus answers {connectionStatus: 1, showPrivileges?} with
// the connection's authenticated users and roles and, with
// showPrivileges, the privileges they grant, one entry per resource with
// its actions sorted: {authInfo: {authenticatedUsers: [{user, db}],
// authenticatedUserRoles: [{role, db}], authenticatedUserPrivileges:
// [{resource: {db, collection} | {cluster: true} | {anyResource: true},
// actions: [...]}]}}. Without authorization, or before authenticating,
// the lists are empty.
func cmdConnectionStatus(_ *engine, r *request) (bson.D, error) {
	users, roles, privs := bson.A{}, bson.A{}, bson.A{}
	var u *authUser
	if r.conn != nil {
		u = r.conn.user
	}
	if u != nil {
		users = append(users, bson.D{{Key: "user", Value: u.name}, {Key: "db", Value: u.db}})
		for _, ro := range u.roles {
			roles = append(roles, bson.D{{Key: "role", Value: ro.Role}, {Key: "db", Value: ro.DB}})
		}
		byRes := map[resource][]string{}
		var order []resource
		for _, p := range u.privileges {
			if _, ok := byRes[p.res]; !ok {
				order = append(order, p.res)
			}
			byRes[p.res] = union(byRes[p.res], p.actions)
		}
		sort.SliceStable(order, func(i, j int) bool { return resourceKey(order[i]) < resourceKey(order[j]) })
		for _, res := range order {
			actions := bson.A{}
			for _, a := range byRes[res] {
				actions = append(actions, a)
			}
			privs = append(privs, bson.D{{Key: "resource", Value: res.doc()}, {Key: "actions", Value: actions}})
		}
	}
	info := bson.D{{Key: "authenticatedUsers", Value: users}, {Key: "authenticatedUserRoles", Value: roles}}
	if truthyArg(r, "showPrivileges") {
		info = append(info, bson.E{Key: "authenticatedUserPrivileges", Value: privs})
	}
	return bson.D{{Key: "authInfo", Value: info}}, nil
}

func resourceKey(r resource) string {
	switch {
	case r.any:
		return "0"
	case r.cluster:
		return "1"
	}
	return "2" + r.db + "\x00" + r.coll
}
