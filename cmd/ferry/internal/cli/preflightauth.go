package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// Privileges, as {connectionStatus: 1, showPrivileges: true} reports them
// for the connection's user: authInfo.authenticatedUsers [{user, db}] and
// authInfo.authenticatedUserPrivileges [{resource, actions}], a resource
// being {db, collection} ("" for any), {cluster: true} or {anyResource:
// true} (MongoDB manual, connectionStatus and "Resource Document").

// resourceRef is what an action is needed on: the cluster, or namespaces
// (db "" every database, coll "" every collection of the database).
type resourceRef struct {
	cluster  bool
	db, coll string
}

func (r resourceRef) String() string {
	switch {
	case r.cluster:
		return "the cluster"
	case r.db == "":
		return "every database"
	case r.coll == "":
		return "database " + r.db
	}
	return r.db + "." + r.coll
}

// grantedPrivilege is one entry of authenticatedUserPrivileges.
type grantedPrivilege struct {
	any, cluster bool
	db, coll     string
	actions      map[string]bool
}

// covers reports whether the privilege's resource includes target: a
// pattern covers every namespace it names, a wildcard only a wildcard.
func (g grantedPrivilege) covers(target resourceRef) bool {
	switch {
	case g.any:
		return true
	case g.cluster || target.cluster:
		return g.cluster && target.cluster
	}
	return (g.db == "" || g.db == target.db) && (g.coll == "" || g.coll == target.coll)
}

// userPrivileges is what connectionStatus said.
type userPrivileges struct {
	users      []string // "name@db"
	privileges []grantedPrivilege
}

func (u *userPrivileges) has(res resourceRef, action string) bool {
	for _, g := range u.privileges {
		if g.covers(res) && (g.actions[action] || g.actions["anyAction"]) {
			return true
		}
	}
	return false
}

// readPrivileges runs connectionStatus with showPrivileges.
func readPrivileges(ctx context.Context, client *mongo.Client) (*userPrivileges, error) {
	var reply struct {
		AuthInfo struct {
			Users []struct {
				User string `bson:"user"`
				DB   string `bson:"db"`
			} `bson:"authenticatedUsers"`
			Privileges []struct {
				Resource bson.Raw `bson:"resource"`
				Actions  []string `bson:"actions"`
			} `bson:"authenticatedUserPrivileges"`
		} `bson:"authInfo"`
	}
	err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "connectionStatus", Value: 1}, {Key: "showPrivileges", Value: true}}).Decode(&reply)
	if err != nil {
		return nil, err
	}
	u := &userPrivileges{}
	for _, x := range reply.AuthInfo.Users {
		u.users = append(u.users, x.User+"@"+x.DB)
	}
	for _, p := range reply.AuthInfo.Privileges {
		g := grantedPrivilege{actions: map[string]bool{}}
		g.any, _ = p.Resource.Lookup("anyResource").BooleanOK()
		g.cluster, _ = p.Resource.Lookup("cluster").BooleanOK()
		db, hasDB := p.Resource.Lookup("db").StringValueOK()
		coll, hasColl := p.Resource.Lookup("collection").StringValueOK()
		if !g.any && !g.cluster && (!hasDB || !hasColl) {
			continue // a resource of another kind (system buckets): not one ferry needs
		}
		g.db, g.coll = db, coll
		for _, a := range p.Actions {
			g.actions[a] = true
		}
		u.privileges = append(u.privileges, g)
	}
	return u, nil
}

// privilegeNeed is an action ferry needs on a resource; optional ones
// only narrow what ferry does (a warning when missing).
type privilegeNeed struct {
	res      resourceRef
	actions  []string
	optional bool
	why      string
}

// privilegeFinding checks the connection's user against needs. Without an
// authenticated user, answered (whether a command the user needs ran) tells
// authorization off (it ran) from a client that must log in
// (Unauthorized).
func privilegeFinding(ctx context.Context, subject, check, uriPath string, client *mongo.Client, needs []privilegeNeed, answered error) finding {
	f := finding{Subject: subject, Check: check}
	u, err := readPrivileges(ctx, client)
	if err != nil {
		f.Result, f.Detail = checkWarn, fmt.Sprintf("could not read them (connectionStatus): %v", err)
		return f
	}
	if len(u.users) == 0 {
		if isUnauthorized(answered) {
			f.Result, f.Detail = checkFail, "no user is authenticated, and the server requires one: "+answered.Error()
			f.Fix = "put the user's name and password in " + uriPath + " (mongodb://user:password@host/...)"
			return f
		}
		f.Result, f.Detail = checkPass, "auth disabled: no user is authenticated, and the server answers"
		return f
	}
	var missing, missingOptional []string
	for _, n := range needs {
		var lacks []string
		for _, a := range n.actions {
			if !u.has(n.res, a) {
				lacks = append(lacks, a)
			}
		}
		if len(lacks) == 0 {
			continue
		}
		line := fmt.Sprintf("%s on %s (%s)", strings.Join(lacks, ", "), n.res, n.why)
		if n.optional {
			missingOptional = append(missingOptional, line)
		} else {
			missing = append(missing, line)
		}
	}
	who := strings.Join(u.users, ", ")
	switch {
	case len(missing) > 0:
		f.Result = checkFail
		f.Detail = fmt.Sprintf("user %s lacks %s", who, strings.Join(append(missing, missingOptional...), "; "))
	case len(missingOptional) > 0:
		f.Result = checkWarn
		f.Detail = fmt.Sprintf("user %s lacks %s", who, strings.Join(missingOptional, "; "))
	default:
		f.Result = checkPass
		f.Detail = fmt.Sprintf("user %s has what ferry needs", who)
		return f
	}
	f.Fix = grantFix(needs, u)
	return f
}

// grantFix suggests the built-in roles that grant what needs lack: read
// (readAnyDatabase for every database) for a change stream's scope,
// readWrite for the state and sink databases (docs/deploy.md,
// "Least-privilege MongoDB roles", has a narrower custom role).
func grantFix(needs []privilegeNeed, u *userPrivileges) string {
	roles := map[[2]string]bool{} // {role, db}
	for _, n := range needs {
		for _, a := range n.actions {
			if u.has(n.res, a) {
				continue
			}
			switch {
			case n.res.db == "":
				roles[[2]string{"readAnyDatabase", "admin"}] = true
			case a == "changeStream" || a == "find" || a == "listCollections":
				roles[[2]string{"read", n.res.db}] = true
			default:
				roles[[2]string{"readWrite", n.res.db}] = true
			}
		}
	}
	var grants []string
	for r := range roles {
		if r[0] == "read" && roles[[2]string{"readWrite", r[1]}] {
			continue // readWrite has read's actions
		}
		grants = append(grants, fmt.Sprintf("{role: %q, db: %q}", r[0], r[1]))
	}
	sort.Strings(grants)
	name, db, _ := strings.Cut(u.users[0], "@")
	return fmt.Sprintf("grant the roles: db.getSiblingDB(%q).grantRolesToUser(%q, [%s])", db, name, strings.Join(grants, ", "))
}

// stateFindings are the state store's: its user's privileges and its
// client's pool.
func (p *preflight) stateFindings(ctx context.Context) []finding {
	ctx, cancel := context.WithTimeout(ctx, p.opts.timeout)
	defer cancel()
	dbName := p.cfg.State.Database
	uriPath := "state.uri"
	if p.cfg.State.URI == "" {
		uriPath = "streams[0].source.uri (the state store's, state.uri unset)"
	}
	if info := p.servers[p.cfg.StateURI()]; info != nil && info.err != nil {
		return []finding{{Subject: "state", Check: "state store", Result: checkFail,
			Detail: "not checked: its server cannot be reached (see its topology row)"}}
	}
	state := resourceRef{db: dbName}
	needs := []privilegeNeed{
		{res: state, actions: []string{"find", "insert", "update", "remove", "createIndex"},
			why: "leases, members, checkpoints, the ledger, dead letters"},
		{res: state, actions: []string{"changeStream"}, optional: true,
			why: "each group watches its leases to rebalance at once; without it, on its interval only"},
	}
	for _, st := range p.cfg.Streams {
		if m := st.Sink.MongoDB; m != nil {
			needs = append(needs, privilegeNeed{res: resourceRef{db: m.Database, coll: m.Collection},
				actions: []string{"find", "insert", "update", "remove", "createIndex"},
				why:     "stream " + st.Name + "'s mongodb sink writes there through the state store's client"})
		}
	}
	answered := p.state.Database(dbName).Collection("leases").FindOne(ctx, bson.D{}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if answered == mongo.ErrNoDocuments {
		answered = nil
	}
	out := []finding{privilegeFinding(ctx, "state", "privileges", uriPath, p.state, needs, answered)}
	need := p.cfg.StatePoolNeed()
	out = append(out, poolFinding("state", p.cfg.StateURI(), need,
		fmt.Sprintf("%d = a lease renewal per partition, an ownership watch per stream, %d for heartbeats, checkpoints, the ledger and dead letters",
			need, config.PoolHeadroom)))
	return out
}

// poolFinding reports the pool a client of uri gets against what it needs
// (config.SourcePoolNeed, StatePoolNeed): config.Parse refuses a
// maxPoolSize below the need, so this says how the pool is sized.
func poolFinding(subject string, uri config.MongoURI, need uint64, why string) finding {
	size, explicit := config.PoolSize(uri, need)
	f := finding{Subject: subject, Check: "pool", Result: checkPass}
	switch {
	case explicit && size == 0:
		f.Detail = fmt.Sprintf("maxPoolSize=0 in the URI: no limit; needs %s", why)
	case explicit && size < need:
		f.Result = checkFail
		f.Detail = fmt.Sprintf("maxPoolSize=%d in the URI is below the %s", size, why)
		f.Fix = fmt.Sprintf("set maxPoolSize to at least %d, or leave it out and ferry sizes the pool", need)
	case explicit:
		f.Detail = fmt.Sprintf("maxPoolSize=%d in the URI; needs %s", size, why)
	default:
		f.Detail = fmt.Sprintf("%d connections, sized by ferry; needs %s", size, why)
	}
	return f
}
