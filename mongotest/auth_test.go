package mongotest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/mongotest"
)

// TestCredentialsRefused: the emulator has no users, so a client with
// credentials fails as against a MongoDB server that does not know the
// user: its handshake's saslStart gets AuthenticationFailed (18), which
// the driver reports as a server error with that code, and the message
// names no password.
func TestCredentialsRefused(t *testing.T) {
	srv := mongotest.New(t)
	uri := strings.Replace(srv.URI(), "mongodb://", "mongodb://bob:s3cret-pw@", 1)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	err = client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "ping", Value: 1}}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(18) || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("ping with credentials: %v; want AuthenticationFailed (18)", err)
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("the error quotes the password: %v", err)
	}
}

// connectAs connects to srv as user:password (no credentials when user is
// empty), with a short server selection timeout.
func connectAs(t *testing.T, srv *mongotest.Server, user, password string) *mongo.Client {
	t.Helper()
	uri := srv.URI()
	if user != "" {
		uri = strings.Replace(uri, "mongodb://", "mongodb://"+user+":"+password+"@", 1)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client
}

// TestUsersAndRoles: with users, the server runs with authorization on. A
// user logs in with SCRAM-SHA-256 and may do what its built-in roles grant
// (read on shop: find and change streams there, no insert, nothing on
// another database) and nothing else, each refusal Unauthorized (13) as a
// server words it; a client without credentials runs only the handshake's
// commands; a wrong password fails the handshake (18).
func TestUsersAndRoles(t *testing.T) {
	srv := mongotest.New(t,
		mongotest.User("admin", "adm1n", mongotest.Role{Role: "root", DB: "admin"}),
		mongotest.User("reader", "r3ad", mongotest.Role{Role: "read", DB: "shop"}),
		mongotest.User("writer", "wr1te", mongotest.Role{Role: "readWrite", DB: "shop"}))
	ctx := context.Background()
	admin := connectAs(t, srv, "admin", "adm1n")
	if _, err := admin.Database("shop").Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("root inserts: %v", err)
	}

	reader := connectAs(t, srv, "reader", "r3ad")
	orders := reader.Database("shop").Collection("orders")
	if n, err := orders.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("read: count = %d, %v; want 1", n, err)
	}
	cs, err := orders.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatalf("read opens a change stream on its database: %v", err)
	}
	cs.Close(ctx)
	_, err = orders.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	if !serverCode(err, 13) || !strings.Contains(err.Error(), "not authorized on shop to execute command { insert: \"orders\"") {
		t.Fatalf("read inserts: %v; want Unauthorized (13), not authorized on shop", err)
	}
	if err := reader.Database("other").Collection("c").FindOne(ctx, bson.D{}).Err(); !serverCode(err, 13) {
		t.Fatalf("read on shop finds in other: %v; want Unauthorized", err)
	}
	if _, err := reader.Watch(ctx, mongo.Pipeline{}); !serverCode(err, 13) {
		t.Fatalf("read on shop watches the cluster: %v; want Unauthorized", err)
	}
	err = reader.Database("admin").RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}}).Err()
	if !serverCode(err, 13) {
		t.Fatalf("read runs getParameter: %v; want Unauthorized", err)
	}

	writer := connectAs(t, srv, "writer", "wr1te")
	if _, err := writer.Database("shop").Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("readWrite inserts: %v", err)
	}
	err = writer.Database("shop").RunCommand(ctx, bson.D{{Key: "collMod", Value: "orders"},
		{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err()
	if !serverCode(err, 13) {
		t.Fatalf("readWrite runs collMod: %v; want Unauthorized (collMod is dbAdmin's)", err)
	}

	anon := connectAs(t, srv, "", "")
	if err := anon.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("ping without credentials: %v", err)
	}
	err = anon.Database("shop").Collection("orders").FindOne(ctx, bson.D{}).Err()
	if !serverCode(err, 13) || !strings.Contains(err.Error(), "requires authentication") {
		t.Fatalf("find without credentials: %v; want Unauthorized, requires authentication", err)
	}

	bad := connectAs(t, srv, "reader", "wrong")
	if err := bad.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); !serverCode(err, 18) {
		t.Fatalf("wrong password: %v; want AuthenticationFailed (18)", err)
	}
}

// TestConnectionStatusPrivileges: connectionStatus with showPrivileges
// answers in the server's shape: the user, its roles, and its privileges
// one entry per resource with the role's actions (read: changeStream and
// find among them, no insert); without showPrivileges no privileges;
// without authorization, empty lists.
func TestConnectionStatusPrivileges(t *testing.T) {
	srv := mongotest.New(t, mongotest.User("reader", "r3ad", mongotest.Role{Role: "read", DB: "shop"},
		mongotest.Role{Role: "clusterMonitor", DB: "admin"}))
	ctx := context.Background()
	reader := connectAs(t, srv, "reader", "r3ad")
	var st struct {
		AuthInfo struct {
			AuthenticatedUsers          []struct{ User, DB string }
			AuthenticatedUserRoles      []struct{ Role, DB string }
			AuthenticatedUserPrivileges []struct {
				Resource bson.M
				Actions  []string
			}
		} `bson:"authInfo"`
	}
	if err := reader.Database("admin").RunCommand(ctx, bson.D{{Key: "connectionStatus", Value: 1}, {Key: "showPrivileges", Value: true}}).Decode(&st); err != nil {
		t.Fatal(err)
	}
	ai := st.AuthInfo
	if len(ai.AuthenticatedUsers) != 1 || ai.AuthenticatedUsers[0].User != "reader" || ai.AuthenticatedUsers[0].DB != "admin" {
		t.Fatalf("authenticatedUsers %+v", ai.AuthenticatedUsers)
	}
	if len(ai.AuthenticatedUserRoles) != 2 || ai.AuthenticatedUserRoles[0].Role != "read" || ai.AuthenticatedUserRoles[0].DB != "shop" {
		t.Fatalf("authenticatedUserRoles %+v", ai.AuthenticatedUserRoles)
	}
	var shop, cluster []string
	for _, p := range ai.AuthenticatedUserPrivileges {
		switch {
		case p.Resource["db"] == "shop" && p.Resource["collection"] == "":
			shop = p.Actions
		case p.Resource["cluster"] == true:
			cluster = p.Actions
		}
	}
	if !strings.Contains(strings.Join(shop, ","), "changeStream,collStats,dbHash,dbStats,find,") || strings.Contains(strings.Join(shop, ","), "insert") {
		t.Errorf("privileges on {db: shop, collection: \"\"}: %v; want read's actions", shop)
	}
	if !strings.Contains(strings.Join(cluster, ","), "getParameter") || !strings.Contains(strings.Join(cluster, ","), "serverStatus") {
		t.Errorf("privileges on the cluster: %v; want clusterMonitor's", cluster)
	}
	raw, err := reader.Database("admin").RunCommand(ctx, bson.D{{Key: "connectionStatus", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.LookupErr("authInfo", "authenticatedUserPrivileges"); err == nil {
		t.Errorf("connectionStatus without showPrivileges lists privileges: %s", raw)
	}

	open := mongotest.New(t)
	c := connectAs(t, open, "", "")
	raw, err = c.Database("admin").RunCommand(ctx, bson.D{{Key: "connectionStatus", Value: 1}, {Key: "showPrivileges", Value: true}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if users := raw.Lookup("authInfo", "authenticatedUsers").Array(); len(users) != 5 { // an empty array is 5 bytes
		t.Errorf("authorization off: authenticatedUsers %s; want []", users)
	}
}
