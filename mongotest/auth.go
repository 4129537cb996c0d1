package mongotest

import (
	"crypto/rand"
	"fmt"
	"sort"
	"strings"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Authentication and authorization. A server started without User options
// runs with authorization off, as a mongod without --auth: every command
// runs for every client. With users, it runs as a mongod with --auth:
// clients authenticate with SCRAM-SHA-256 (the Go driver's default
// mechanism against a server that offers it) against the admin database,
// a command other than the handshake's needs an authenticated user, and
// each command needs the privileges of MongoDB's built-in roles
// (requiredPrivileges) or fails with Unauthorized (13), as on a server.
// connectionStatus reports the user, its roles and, with showPrivileges,
// its privileges grouped by resource, in the server's shape.

// Role grants one of MongoDB's built-in roles: Role "read", "readWrite",
// "dbAdmin" or "dbOwner" on database DB; "readAnyDatabase",
// "readWriteAnyDatabase", "dbAdminAnyDatabase", "clusterMonitor" or "root"
// on "admin" (the only database those exist on).
type Role struct {
	Role string
	DB   string
}

// User adds a user of the admin database with the given password and
// roles, and turns authorization on: every client must then authenticate
// (SCRAM-SHA-256, user:password@ in the connection string) and has the
// privileges of its user's roles. cmd/mongotest: -user
// name:password:role@db[,role@db...].
func User(name, password string, roles ...Role) Option {
	return optionFunc(func(c *config) {
		if name == "" || strings.ContainsAny(name, ":@") {
			c.err = fmt.Errorf("mongotest: User %q: a user name must be non-empty, without ':' or '@'", name)
			return
		}
		for _, r := range roles {
			scope, ok := builtinRoles[r.Role]
			switch {
			case !ok:
				c.err = fmt.Errorf("mongotest: User %q: unknown role %q (known: %s)", name, r.Role, knownRoles())
				return
			case r.DB == "":
				c.err = fmt.Errorf("mongotest: User %q: role %s needs a database (role@db)", name, r.Role)
				return
			case scope.adminOnly && r.DB != "admin":
				c.err = fmt.Errorf("mongotest: User %q: role %s exists only on the admin database, not on %q", name, r.Role, r.DB)
				return
			}
		}
		c.users = append(c.users, userSpec{name: name, password: password, roles: roles})
	})
}

type userSpec struct {
	name, password string
	roles          []Role
}

// authUser is a user as the engine knows it.
type authUser struct {
	name, db   string
	roles      []Role
	creds      scram.StoredCredentials
	privileges []privilege
}

// scramIterations is MongoDB's default scramSHA256IterationCount.
const scramIterations = 15000

// newUsers derives each user's SCRAM-SHA-256 credentials and privileges.
func newUsers(specs []userSpec) map[string]*authUser {
	if len(specs) == 0 {
		return nil
	}
	users := make(map[string]*authUser, len(specs))
	for _, s := range specs {
		client, err := scram.SHA256.NewClient(s.name, s.password, "")
		if err != nil {
			panic(fmt.Sprintf("mongotest: user %q: %v", s.name, err)) // a password SASLprep refuses
		}
		salt := make([]byte, 28)
		_, _ = rand.Read(salt)
		u := &authUser{name: s.name, db: "admin", roles: s.roles,
			creds: client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: scramIterations})}
		for _, r := range s.roles {
			u.privileges = append(u.privileges, builtinRoles[r.Role].privileges(r.DB)...)
		}
		users[u.db+"."+u.name] = u
	}
	return users
}

// authOn reports whether the server checks users and privileges.
func (e *engine) authOn() bool { return e.users != nil }

// authMechanisms is getParameter's authenticationMechanisms.
func (e *engine) authMechanisms() bson.A {
	if e.authOn() {
		return bson.A{"SCRAM-SHA-256"}
	}
	return bson.A{}
}

// A resource is what a privilege applies to: the cluster, any resource,
// or namespaces: db "" is every database, collection "" every collection
// of the database.
type resource struct {
	cluster, any bool
	db, coll     string
}

func (r resource) doc() bson.D {
	switch {
	case r.any:
		return bson.D{{Key: "anyResource", Value: true}}
	case r.cluster:
		return bson.D{{Key: "cluster", Value: true}}
	}
	return bson.D{{Key: "db", Value: r.db}, {Key: "collection", Value: r.coll}}
}

// covers reports whether a privilege on r applies to target: a pattern
// covers every namespace it names, a wildcard only a wildcard.
func (r resource) covers(target resource) bool {
	switch {
	case r.any:
		return true
	case r.cluster || target.cluster:
		return r.cluster && target.cluster
	}
	return (r.db == "" || r.db == target.db) && (r.coll == "" || r.coll == target.coll)
}

// A privilege is a set of actions on a resource.
type privilege struct {
	res     resource
	actions []string
}

// need is one privilege a command needs.
type need struct {
	res    resource
	action string
}

// allows reports whether u holds action on res.
func (u *authUser) allows(n need) bool {
	for _, p := range u.privileges {
		if !p.res.covers(n.res) {
			continue
		}
		for _, a := range p.actions {
			if a == n.action || a == "anyAction" {
				return true
			}
		}
	}
	return false
}

// The built-in roles, with the actions the manual's "Built-In Roles" lists
// for each (those a command of the emulator can need).
var (
	readActions = []string{"changeStream", "collStats", "dbHash", "dbStats", "find", "killCursors", "listCollections",
		"listIndexes", "listSearchIndexes"}
	writeActions = []string{"convertToCapped", "createCollection", "createIndex", "createSearchIndexes", "dropCollection",
		"dropIndex", "dropSearchIndex", "insert", "remove", "renameCollectionSameDB", "update", "updateSearchIndex"}
	dbAdminActions = []string{"bypassDocumentValidation", "collMod", "collStats", "compact", "convertToCapped",
		"createCollection", "createIndex", "dbStats", "dropCollection", "dropDatabase", "dropIndex", "enableProfiler",
		"listCollections", "listIndexes", "planCacheIndexFilter", "planCacheRead", "planCacheWrite", "reIndex",
		"renameCollectionSameDB", "storageDetails", "validate"}
	clusterMonitorActions = []string{"connPoolStats", "getCmdLineOpts", "getLog", "getParameter", "getShardMap",
		"hostInfo", "inprog", "listDatabases", "listSessions", "netstat", "replSetGetConfig", "replSetGetStatus",
		"serverStatus", "top"}
)

type builtinRole struct {
	adminOnly bool
	// privileges returns the role's privileges when granted on db.
	privileges func(db string) []privilege
}

func onDB(actions ...[]string) func(string) []privilege {
	return func(db string) []privilege {
		return []privilege{{res: resource{db: db}, actions: union(actions...)}}
	}
}

func anyDB(actions ...[]string) func(string) []privilege {
	return func(string) []privilege {
		return []privilege{{res: resource{}, actions: union(actions...)},
			{res: resource{cluster: true}, actions: []string{"listDatabases"}}}
	}
}

var builtinRoles = map[string]builtinRole{
	"read":                 {privileges: onDB(readActions)},
	"readWrite":            {privileges: onDB(readActions, writeActions)},
	"dbAdmin":              {privileges: onDB(dbAdminActions)},
	"dbOwner":              {privileges: onDB(readActions, writeActions, dbAdminActions)},
	"readAnyDatabase":      {adminOnly: true, privileges: anyDB(readActions)},
	"readWriteAnyDatabase": {adminOnly: true, privileges: anyDB(readActions, writeActions)},
	"dbAdminAnyDatabase":   {adminOnly: true, privileges: anyDB(dbAdminActions)},
	"clusterMonitor": {adminOnly: true, privileges: func(string) []privilege {
		return []privilege{{res: resource{cluster: true}, actions: clusterMonitorActions}}
	}},
	"root": {adminOnly: true, privileges: func(string) []privilege {
		return []privilege{{res: resource{any: true}, actions: []string{"anyAction"}}}
	}},
}

func knownRoles() string {
	var names []string
	for n := range builtinRoles {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func union(sets ...[]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range sets {
		for _, a := range s {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

// noAuthCommands run for a client that has not authenticated (the
// handshake, authentication, and what a server answers anyone).
var noAuthCommands = map[string]bool{
	"hello": true, "isMaster": true, "ismaster": true, "saslStart": true, "saslContinue": true, "authenticate": true,
	"logout": true, "buildInfo": true, "buildinfo": true, "ping": true, "connectionStatus": true, "endSessions": true,
	"whatsmyuri": true,
}

// authorize checks, with authorization on, that the connection's user may
// run r: Unauthorized (13) when it has not authenticated or lacks a
// privilege the command needs.
func (e *engine) authorize(r *request) error {
	if !e.authOn() || r.conn == nil || noAuthCommands[r.name] {
		return nil
	}
	u := r.conn.user
	if u == nil {
		return errorf(mongoerr.CodeUnauthorized, "Command %s requires authentication", r.name)
	}
	for _, n := range requiredPrivileges(r) {
		if !u.allows(n) {
			return errorf(mongoerr.CodeUnauthorized, "not authorized on %s to execute command %s", r.db, commandSummary(r))
		}
	}
	return nil
}

// commandSummary is the command as the server's Unauthorized message shows
// it: its name and target, and its database.
func commandSummary(r *request) string {
	target := fmt.Sprint(r.cmd[0].Value)
	if s, ok := r.cmd[0].Value.(string); ok {
		target = fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("{ %s: %s, $db: %q }", r.name, target, r.db)
}

// requiredPrivileges is what r needs, as the server's commands check it
// (for bulkWrite, every action on each namespace it names: the server
// checks each operation's own).
func requiredPrivileges(r *request) []need {
	coll, _ := r.cmd[0].Value.(string)
	ns := resource{db: r.db, coll: coll}
	dbRes := resource{db: r.db}
	cluster := resource{cluster: true}
	on := func(res resource, actions ...string) []need {
		out := make([]need, len(actions))
		for i, a := range actions {
			out[i] = need{res: res, action: a}
		}
		return out
	}
	switch r.name {
	case "find", "count", "distinct":
		return on(ns, "find")
	case "listIndexes":
		return on(ns, "listIndexes")
	case "listCollections":
		return on(dbRes, "listCollections")
	case "insert":
		return on(ns, "insert")
	case "update":
		if anyUpsert(r, "updates") {
			return on(ns, "update", "insert")
		}
		return on(ns, "update")
	case "delete":
		return on(ns, "remove")
	case "findAndModify", "findandmodify":
		switch {
		case truthyArg(r, "remove"):
			return on(ns, "find", "remove")
		case truthyArg(r, "upsert"):
			return on(ns, "find", "update", "insert")
		}
		return on(ns, "find", "update")
	case "aggregate":
		return aggregatePrivileges(r, ns)
	case "create":
		return on(ns, "createCollection")
	case "drop":
		return on(ns, "dropCollection")
	case "dropDatabase":
		return on(dbRes, "dropDatabase")
	case "createIndexes":
		return on(ns, "createIndex")
	case "dropIndexes", "deleteIndexes":
		return on(ns, "dropIndex")
	case "collMod":
		return on(ns, "collMod")
	case "dbStats":
		return on(dbRes, "dbStats")
	case "collStats":
		return on(ns, "collStats")
	case "renameCollection":
		var out []need
		for _, key := range []string{"renameCollection", "to"} {
			v, _ := r.arg(key)
			s, _ := v.(string)
			db, c, _ := strings.Cut(s, ".")
			out = append(out, on(resource{db: db, coll: c}, "renameCollectionSameDB")...)
		}
		return out
	case "bulkWrite":
		var out []need
		infos, _ := r.arg("nsInfo")
		a, _ := infos.(bson.A)
		for _, info := range a {
			d, _ := info.(bson.D)
			s, _ := lookupD(d, "ns").(string)
			db, c, _ := strings.Cut(s, ".")
			out = append(out, on(resource{db: db, coll: c}, "insert", "update", "remove")...)
		}
		return out
	case "getParameter", "setParameter", "serverStatus", "replSetGetStatus", "getCmdLineOpts", "hostInfo":
		return on(cluster, r.name)
	case "listDatabases":
		return on(cluster, "listDatabases")
	case "killAllSessions":
		return on(cluster, "killAnySession")
	case "configureFailPoint", cmdNameAdvanceClock, cmdNameNow:
		return on(resource{any: true}, "anyAction") // a test hook: root only
	}
	return nil // sessions, cursors of one's own, transactions' commit and abort, listCommands
}

// aggregatePrivileges: a change stream needs changeStream and find on its
// scope (the collection, the database, or every database); another
// pipeline find on its collection, and $out or $merge the writes on their
// target.
func aggregatePrivileges(r *request, ns resource) []need {
	p, _ := r.arg("pipeline")
	stages, _ := p.(bson.A)
	var first string
	if len(stages) > 0 {
		if d, ok := stages[0].(bson.D); ok && len(d) > 0 {
			first = d[0].Key
		}
	}
	if first == "$changeStream" {
		scope := ns
		if ns.coll == "" {
			scope = resource{db: r.db}
			opts, _ := stages[0].(bson.D)[0].Value.(bson.D)
			if mql.Truthy(lookupD(opts, "allChangesForCluster")) {
				scope = resource{}
			}
		}
		return []need{{res: scope, action: "changeStream"}, {res: scope, action: "find"}}
	}
	out := []need{{res: ns, action: "find"}}
	for _, st := range stages {
		d, ok := st.(bson.D)
		if !ok || len(d) == 0 || (d[0].Key != "$out" && d[0].Key != "$merge") {
			continue
		}
		target := resource{db: r.db}
		switch v := d[0].Value.(type) {
		case string:
			target.coll = v
		case bson.D:
			if db, ok := lookupD(v, "db").(string); ok {
				target.db = db
			}
			if c, ok := lookupD(v, "coll").(string); ok {
				target.coll = c
			} else if into, ok := lookupD(v, "into").(string); ok {
				target.coll = into
			}
		}
		for _, a := range []string{"insert", "update", "remove"} {
			out = append(out, need{res: target, action: a})
		}
	}
	return out
}

func truthyArg(r *request, key string) bool {
	v, _ := r.arg(key)
	return mql.Truthy(v)
}

// anyUpsert reports whether any statement of the named array (updates)
// is an upsert.
func anyUpsert(r *request, field string) bool {
	var docs []bson.D
	if v, ok := r.arg(field); ok {
		a, _ := v.(bson.A)
		for _, x := range a {
			if d, ok := x.(bson.D); ok {
				docs = append(docs, d)
			}
		}
	}
	for _, raw := range r.rawSequence(field) {
		var d bson.D
		if bson.Unmarshal(raw, &d) == nil {
			docs = append(docs, d)
		}
	}
	for _, d := range docs {
		if mql.Truthy(lookupD(d, "upsert")) {
			return true
		}
	}
	return false
}
