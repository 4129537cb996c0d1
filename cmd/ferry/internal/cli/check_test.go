package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/internal/poll"
	"github.com/ferry-io/ferry/mongotest"
)

// checkConfig is a configuration of one stream on shop.orders, state and
// source at uri; source adds lines under source:, stream under the stream.
func checkConfig(t *testing.T, uri, source, stream string) string {
	t.Helper()
	return writeFile(t, fmt.Sprintf(`
log: {level: info, format: json}
state: {uri: %q, database: ferry}
streams:
  - name: orders
    source:
      uri: %q
      scope: {collection: shop.orders}
%s
%s
    sink: {stdout: {}}
`, uri, uri, indent(source, "      "), indent(stream, "    ")))
}

func indent(s, by string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = by + strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

// checkOutput is `ferry check -json`'s document.
type checkOutput struct {
	Findings         []finding
	Pass, Warn, Fail int
}

// runCheckJSON runs ferry check -json with args and returns its exit code
// and findings.
func runCheckJSON(t *testing.T, args ...string) (int, checkOutput) {
	t.Helper()
	code, out, errOut := runCLI(append([]string{"check", "-json"}, args...)...)
	var doc checkOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ferry check -json: exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	return code, doc
}

// row returns the finding of check on subject, failing the test if there
// is none.
func (o checkOutput) row(t *testing.T, subject, check string) finding {
	t.Helper()
	for _, f := range o.Findings {
		if f.Subject == subject && f.Check == check {
			return f
		}
	}
	t.Fatalf("no %s: %s row in %+v", subject, check, o.Findings)
	return finding{}
}

// expect fails the test unless the row of check on subject has result
// and its fix contains fix.
func (o checkOutput) expect(t *testing.T, subject, check string, result checkResult, fix string) finding {
	t.Helper()
	f := o.row(t, subject, check)
	if f.Result != result || !strings.Contains(f.Fix, fix) {
		t.Errorf("%s: %s = %s %q, fix %q; want %s with a fix containing %q", subject, check, f.Result, f.Detail, f.Fix, result, fix)
	}
	return f
}

// createOrders creates shop.orders, with pre- and post-images when images.
func createOrders(t *testing.T, client *mongo.Client, images bool) {
	t.Helper()
	opts := options.CreateCollection()
	if images {
		opts.SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})
	}
	if err := client.Database("shop").CreateCollection(context.Background(), "orders", opts); err != nil {
		t.Fatal(err)
	}
}

func clientOf(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// TestCheckHealthy: against a healthy server every row passes — a group
// of 4 partitions, required images on a collection that records them —
// and ferry check exits 0; the table has a row per finding under CHECK,
// RESULT, DETAIL, FIX.
func TestCheckHealthy(t *testing.T) {
	srv := mongotest.New(t)
	createOrders(t, clientOf(t, srv.URI()), true)
	cfg := checkConfig(t, srv.URI(), "full_document: required\nfull_document_before_change: required", "group: {partitions: 4}")
	code, doc := runCheckJSON(t, "-c", cfg)
	for _, f := range doc.Findings {
		if f.Result != checkPass {
			t.Errorf("%s: %s = %s %q (fix %q); want pass", f.Subject, f.Check, f.Result, f.Detail, f.Fix)
		}
	}
	if code != 0 || doc.Fail != 0 || doc.Warn != 0 || doc.Pass != len(doc.Findings) || len(doc.Findings) < 12 {
		t.Errorf("exit %d, %d pass %d warn %d fail of %d rows; want 0 and all pass", code, doc.Pass, doc.Warn, doc.Fail, len(doc.Findings))
	}
	for _, c := range []string{"topology", "version", "featureCompatibilityVersion", "clock"} {
		doc.row(t, "server "+uriHosts(mongoURI(srv)), c)
	}
	for _, c := range []string{"change stream", "$toHashedIndexKey", "$changeStreamSplitLargeEvent", "pre/post images",
		"source privileges", "oplog window", "pool"} {
		doc.row(t, "stream orders", c)
	}
	code, out, _ := runCLI("check", "-c", cfg)
	if code != 0 || !strings.HasPrefix(out, "CHECK") || !strings.Contains(out, "stream orders: $toHashedIndexKey") ||
		!strings.Contains(out, fmt.Sprintf("%d pass, 0 warn, 0 fail", len(doc.Findings))) {
		t.Errorf("ferry check (table): exit %d\n%s", code, out)
	}
}

// TestCheckAtlasSharedTier: on an Atlas shared-tier cluster, which refuses
// $changeStreamSplitLargeEvent while reporting 8.0, the stream (which
// ferry opens with the stage on 8.0) and the stage fail with the fix to
// turn splitting off; the featureCompatibilityVersion cannot be read
// (warn). With split_large_events: false both pass and check exits 0.
func TestCheckAtlasSharedTier(t *testing.T) {
	srv := mongotest.New(t, mongotest.AtlasSharedTier())
	code, doc := runCheckJSON(t, "-c", checkConfig(t, srv.URI(), "", ""))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	doc.expect(t, "stream orders", "$changeStreamSplitLargeEvent", checkFail, "streams[0].source.split_large_events: false")
	doc.expect(t, "stream orders", "change stream", checkFail, "split_large_events: false")
	fcv := doc.expect(t, "server "+uriHosts(mongoURI(srv)), "featureCompatibilityVersion", checkWarn, "")
	if !strings.Contains(fcv.Detail, "could not read") || !strings.Contains(fcv.Detail, "AtlasError") {
		t.Errorf("featureCompatibilityVersion detail %q", fcv.Detail)
	}
	code, doc = runCheckJSON(t, "-c", checkConfig(t, srv.URI(), "split_large_events: false", ""))
	if code != 0 || doc.Fail != 0 {
		t.Errorf("split_large_events: false: exit %d, %d fail: %+v", code, doc.Fail, doc.Findings)
	}
	doc.expect(t, "stream orders", "$changeStreamSplitLargeEvent", checkPass, "")
	doc.expect(t, "stream orders", "change stream", checkPass, "")
}

// TestCheckOlderReleases: MongoDB 5.0 has neither the split stage nor pre-
// and post-images: the version warns, the split stage warns (ferry does
// not add it there; a large event then stops the stream), required images
// fail (as does the stream's open, refused with 40575); 4.4 lacks
// $toHashedIndexKey, so a group of partitions fails with the fix of one
// partition, while one partition needs nothing.
func TestCheckOlderReleases(t *testing.T) {
	srv := mongotest.New(t, mongotest.ServerVersion("5.0.0"))
	code, doc := runCheckJSON(t, "-c", checkConfig(t, srv.URI(), "full_document: required", ""))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	doc.expect(t, "server "+uriHosts(mongoURI(srv)), "version", checkWarn, "upgrade to 7.0")
	doc.expect(t, "stream orders", "$changeStreamSplitLargeEvent", checkWarn, "upgrade to 7.0 or 6.0.9+, or set streams[0].oversize")
	images := doc.expect(t, "stream orders", "pre/post images", checkFail, "upgrade to 6.0")
	if !strings.Contains(images.Detail, "has no pre- and post-images") {
		t.Errorf("pre/post images detail %q", images.Detail)
	}
	doc.expect(t, "stream orders", "change stream", checkFail, "pre- and post-images and showExpandedEvents need MongoDB 6.0+")
	doc.expect(t, "stream orders", "$toHashedIndexKey", checkPass, "")

	old := mongotest.New(t, mongotest.ServerVersion("4.4.29"))
	_, doc = runCheckJSON(t, "-c", checkConfig(t, old.URI(), "split_large_events: false", "group: {partitions: 3}"))
	doc.expect(t, "stream orders", "$toHashedIndexKey", checkFail, "streams[0].group.partitions: 1")
	_, doc = runCheckJSON(t, "-c", checkConfig(t, old.URI(), "split_large_events: false", "group: {partitions: 1}"))
	doc.expect(t, "stream orders", "$toHashedIndexKey", checkPass, "")
}

// TestCheckPreImagesOff: on a collection that does not record pre- and
// post-images, required images fail and whenAvailable ones warn, each
// with the collMod that turns them on; a database stream names the
// collections lacking them.
func TestCheckPreImagesOff(t *testing.T) {
	srv := mongotest.New(t)
	client := clientOf(t, srv.URI())
	createOrders(t, client, false)
	_, doc := runCheckJSON(t, "-c", checkConfig(t, srv.URI(), "full_document_before_change: required", ""))
	doc.expect(t, "stream orders", "pre/post images", checkFail, `runCommand({collMod: "orders", changeStreamPreAndPostImages: {enabled: true}})`)
	code, doc := runCheckJSON(t, "-c", checkConfig(t, srv.URI(), "full_document: whenAvailable", ""))
	doc.expect(t, "stream orders", "pre/post images", checkWarn, "collMod")
	if code != 0 {
		t.Errorf("whenAvailable without images: exit %d, want 0 (a warning)", code)
	}
	if err := client.Database("shop").CreateCollection(context.Background(), "customers",
		options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, `
state: {uri: "`+srv.URI()+`", database: ferry}
streams:
  - name: shop
    source: {uri: "`+srv.URI()+`", scope: {database: shop}, full_document: required}
    sink: {stdout: {}}
`)
	_, doc = runCheckJSON(t, "-c", cfg)
	f := doc.expect(t, "stream shop", "pre/post images", checkFail, "collMod")
	if !strings.Contains(f.Detail, "off on 1 collection (shop.orders)") {
		t.Errorf("database stream: %q; want shop.orders named, not shop.customers", f.Detail)
	}
}

// TestCheckPrivileges: with authorization on, a user with read on shop
// only may watch the stream (source privileges pass) but not keep the
// state (fail, naming the actions and granting readWrite); with readWrite
// on the state database every privilege passes; without
// credentials both fail with the fix of putting them in the URI.
func TestCheckPrivileges(t *testing.T) {
	srv := mongotest.New(t,
		mongotest.User("reader", "pw", mongotest.Role{Role: "read", DB: "shop"}),
		mongotest.User("ferry", "pw", mongotest.Role{Role: "read", DB: "shop"}, mongotest.Role{Role: "readWrite", DB: "ferry"}))
	as := func(user string) string {
		return strings.Replace(srv.URI(), "mongodb://", "mongodb://"+user+":pw@", 1)
	}
	_, doc := runCheckJSON(t, "-c", checkConfig(t, as("reader"), "", ""))
	doc.expect(t, "stream orders", "source privileges", checkPass, "")
	state := doc.expect(t, "state", "privileges", checkFail, `grantRolesToUser("reader", [{role: "readWrite", db: "ferry"}])`)
	if !strings.Contains(state.Detail, "find, insert, update, remove, createIndex on database ferry") {
		t.Errorf("state privileges detail %q", state.Detail)
	}
	doc.expect(t, "server "+uriHosts(mongoURI(srv)), "featureCompatibilityVersion", checkWarn, "clusterMonitor")

	_, doc = runCheckJSON(t, "-c", checkConfig(t, as("ferry"), "", ""))
	doc.expect(t, "stream orders", "source privileges", checkPass, "")
	doc.expect(t, "state", "privileges", checkPass, "")
	doc.expect(t, "stream orders", "change stream", checkPass, "")

	_, doc = runCheckJSON(t, "-c", checkConfig(t, srv.URI(), "", ""))
	doc.expect(t, "stream orders", "source privileges", checkFail, "put the user's name and password in streams[0].source.uri")
	doc.expect(t, "state", "privileges", checkFail, "put the user's name and password in state.uri")
	doc.expect(t, "stream orders", "change stream", checkFail, "streams[0].source.uri")
}

// TestCheckOplogWindow: an oplog whose first entry is 3h old holds 3h:
// enough for a 1h downtime (pass), less than twice 2h (warn), less than
// 4h (fail, exit 1).
func TestCheckOplogWindow(t *testing.T) {
	var offset atomic.Int64
	offset.Store(int64(-3 * time.Hour))
	srv := mongotest.New(t, mongotest.Clock(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }))
	offset.Store(0) // the first entry (the set's initiation) is 3h old; the server's clock is this machine's from now on
	cfg := checkConfig(t, srv.URI(), "", "")
	for _, tc := range []struct {
		downtime string
		result   checkResult
		code     int
	}{{"1h", checkPass, 0}, {"2h", checkWarn, 0}, {"4h", checkFail, 1}} {
		code, doc := runCheckJSON(t, "-c", cfg, "-downtime", tc.downtime)
		f := doc.expect(t, "stream orders", "oplog window", tc.result, "")
		if !strings.HasPrefix(f.Detail, "the oplog holds 3h0m") {
			t.Errorf("-downtime %s: %q; want a window of 3h", tc.downtime, f.Detail)
		}
		if code != tc.code || (tc.result != checkPass && !strings.Contains(f.Fix, "replSetResizeOplog")) {
			t.Errorf("-downtime %s: exit %d, fix %q; want exit %d", tc.downtime, code, f.Fix, tc.code)
		}
	}
}

// TestCheckClock: a server clock 5s off warns, 2 minutes off fails, each
// with the NTP fix; leases are said to be safe.
func TestCheckClock(t *testing.T) {
	for _, tc := range []struct {
		off    time.Duration
		result checkResult
	}{{5 * time.Second, checkWarn}, {-2 * time.Minute, checkFail}} {
		srv := mongotest.New(t, mongotest.Clock(func() time.Time { return time.Now().Add(tc.off) }))
		_, doc := runCheckJSON(t, "-c", checkConfig(t, srv.URI(), "", ""))
		f := doc.expect(t, "server "+uriHosts(mongoURI(srv)), "clock", tc.result, "NTP")
		if !strings.Contains(f.Detail, "leases are safe") {
			t.Errorf("clock %v: %q", tc.off, f.Detail)
		}
	}
}

// TestCheckStandalone: against a standalone server (mongod without
// --replSet) the topology row fails with the fix of a one-member replica
// set, as does the stream (40573); the features tried through change
// streams are one warning, not tried.
func TestCheckStandalone(t *testing.T) {
	srv := mongotest.New(t, mongotest.Standalone())
	code, doc := runCheckJSON(t, "-c", checkConfig(t, srv.URI(), "", ""))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	doc.expect(t, "server "+uriHosts(mongoURI(srv)), "topology", checkFail, "rs.initiate()")
	doc.expect(t, "stream orders", "change stream", checkFail, "rs.initiate()")
	doc.expect(t, "stream orders", "change-stream features", checkWarn, "")
}

// TestCheckTopology: a standalone server fails the topology row with the
// fix of a one-member replica set; a replica set and mongos pass.
func TestCheckTopology(t *testing.T) {
	for _, tc := range []struct {
		info   serverInfo
		result checkResult
	}{
		{serverInfo{setName: "rs0"}, checkPass},
		{serverInfo{mongos: true}, checkPass},
		{serverInfo{}, checkFail},
	} {
		f := topologyFinding("server h:1", &tc.info, "used by state")
		if f.Result != tc.result || (tc.result == checkFail && !strings.Contains(f.Fix, "rs.initiate()")) {
			t.Errorf("%+v: %s %q %q", tc.info, f.Result, f.Detail, f.Fix)
		}
	}
}

// TestCheckConfigProblems: an invalid configuration is a fail row per
// problem (a pool too small for the partitions among them) and exit 1,
// without connecting.
func TestCheckConfigProblems(t *testing.T) {
	cfg := writeFile(t, `
state: {uri: "mongodb://127.0.0.1:1/?replicaSet=rs0", database: ferry}
streams:
  - name: orders
    source: {uri: "mongodb://127.0.0.1:1/?replicaSet=rs0&maxPoolSize=5", scope: {collection: shop.orders}}
    group: {partitions: 8}
    sink: {stdout: {}}
`)
	code, doc := runCheckJSON(t, "-c", cfg)
	f := doc.expect(t, "config", "streams[0].source.uri", checkFail, "ferry validate")
	if code != 1 || !strings.Contains(f.Detail, "maxPoolSize=5 is too small") {
		t.Errorf("exit %d, %q", code, f.Detail)
	}
}

// TestRunLogsPreflight: ferry run logs the preflight once it starts: on an
// Atlas shared tier the split stage's failure at ERROR with its fix and a
// summary counting it, and it keeps running; on a healthy server only the
// summary, with nothing to warn about.
func TestRunLogsPreflight(t *testing.T) {
	atlas := mongotest.New(t, mongotest.AtlasSharedTier())
	d := startRun(t, checkConfig(t, atlas.URI(), "", ""))
	poll.Until(t, 30*time.Second, func() error {
		d.alive(t)
		if !strings.Contains(d.errOut.String(), `"msg":"preflight done`) {
			return fmt.Errorf("no preflight summary yet")
		}
		return nil
	})
	logs := d.errOut.String()
	for _, want := range []string{
		`"level":"ERROR","msg":"preflight: stream orders: $changeStreamSplitLargeEvent","result":"fail"`,
		`"fix":"set streams[0].source.split_large_events: false`,
		`"level":"WARN","msg":"preflight: server ` + uriHosts(mongoURI(atlas)) + `: featureCompatibilityVersion"`,
		`"warn":1,"fail":2`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("ferry run logs lack %s:\n%s", want, logs)
		}
	}
	d.stop(t)

	healthy := mongotest.New(t)
	d = startRun(t, checkConfig(t, healthy.URI(), "", "group: {partitions: 2}"))
	poll.Until(t, 30*time.Second, func() error {
		d.alive(t)
		if !strings.Contains(d.errOut.String(), `"msg":"preflight done`) {
			return fmt.Errorf("no preflight summary yet")
		}
		return nil
	})
	logs = d.errOut.String()
	if strings.Contains(logs, `"msg":"preflight: `) || !strings.Contains(logs, `"warn":0,"fail":0`) {
		t.Errorf("healthy server: ferry run logs findings:\n%s", logs)
	}
	d.stop(t)
}

func mongoURI(srv *mongotest.Server) config.MongoURI { return config.MongoURI(srv.URI()) }

// TestCheckShardedCluster: through an emulated mongos (2 shards),
// ferry check reports the topology as sharded, lists the shards, opens
// the change stream and tries $toHashedIndexKey and
// $changeStreamSplitLargeEvent for real, finds the images on the sharded
// collection, and reads each shard directly: its periodicNoopIntervalSecs
// (an idle shard holds events back that long: warn at MongoDB's default
// 10 s, pass at 1 s) and its oplog window, beside the window through
// mongos (the shortest shard's).
func TestCheckShardedCluster(t *testing.T) {
	for _, tc := range []struct {
		noop   time.Duration
		result checkResult
	}{{10 * time.Second, checkWarn}, {time.Second, checkPass}} {
		t.Run(tc.noop.String(), func(t *testing.T) {
			sc := mongotest.NewSharded(t, 2, mongotest.NoopInterval(tc.noop))
			client := clientOf(t, sc.URI())
			createOrders(t, client, true)
			if err := client.Database("admin").RunCommand(context.Background(), bson.D{{Key: "shardCollection", Value: "shop.orders"},
				{Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}}).Err(); err != nil {
				t.Fatal(err)
			}
			cfg := checkConfig(t, sc.URI(), "full_document: required\nfull_document_before_change: required", "group: {partitions: 4}")
			code, doc := runCheckJSON(t, "-c", cfg)
			server := "server " + strings.TrimSuffix(strings.TrimPrefix(sc.URI(), "mongodb://"), "/")
			if f := doc.expect(t, server, "topology", checkPass, ""); !strings.Contains(f.Detail, "sharded cluster, through mongos") {
				t.Errorf("topology: %q", f.Detail)
			}
			if f := doc.expect(t, server, "shards", checkPass, ""); !strings.Contains(f.Detail, "2 shard(s): shard0 (shard0/") || !strings.Contains(f.Detail, "shard1 (shard1/") {
				t.Errorf("shards: %q", f.Detail)
			}
			fix := ""
			if tc.result == checkWarn {
				fix = "periodicNoopIntervalSecs=1"
			}
			if f := doc.expect(t, server, "idle-shard latency", tc.result, fix); !strings.Contains(f.Detail, "waits up to "+tc.noop.String()) ||
				!strings.Contains(f.Detail, "shard0 "+tc.noop.String()+", shard1 "+tc.noop.String()) {
				t.Errorf("idle-shard latency: %q", f.Detail)
			}
			for _, c := range []string{"change stream", "$toHashedIndexKey", "$changeStreamSplitLargeEvent", "pre/post images", "source privileges", "pool"} {
				doc.expect(t, "stream orders", c, checkPass, "")
			}
			if f := doc.expect(t, "stream orders", "oplog window", checkPass, ""); !strings.Contains(f.Detail, "through mongos (the shortest of the shards' oplogs)") {
				t.Errorf("oplog window: %q", f.Detail)
			}
			for _, id := range []string{"shard0", "shard1"} {
				if f := doc.expect(t, "stream orders", "oplog window of "+id, checkPass, ""); !strings.Contains(f.Detail, "on "+id+" ("+id+"/") {
					t.Errorf("oplog window of %s: %q", id, f.Detail)
				}
			}
			if code != 0 || doc.Fail != 0 {
				t.Errorf("exit %d with %d fail", code, doc.Fail)
			}
		})
	}
}

// TestIdleShardFindingUnreadable: a shard ferry check cannot read
// directly (unreachable, or refused) makes the idle-shard row a warn that
// assumes MongoDB's default and says how to check each shard.
func TestIdleShardFindingUnreadable(t *testing.T) {
	f := idleShardFinding("server m:1", []*shardInfo{
		{id: "shard0", noop: time.Second},
		{id: "shard1", noopErr: errors.New("(Unauthorized) not authorized")},
	})
	if f.Result != checkWarn || !strings.Contains(f.Detail, "shard1 ((Unauthorized) not authorized)") || !strings.Contains(f.Detail, "expect up to 10 s") ||
		!strings.Contains(f.Detail, "read: shard0 1s") || !strings.Contains(f.Fix, "db.adminCommand({getParameter: 1, periodicNoopIntervalSecs: 1})") {
		t.Errorf("%s %q fix %q", f.Result, f.Detail, f.Fix)
	}
}

// TestShardURI: a shard's URI keeps the source URI's credentials and
// options, names the shard's replica set and drops what would point it
// elsewhere; an SRV URI's implied TLS and authSource are kept.
func TestShardURI(t *testing.T) {
	for _, tc := range []struct{ uri, host, want string }{
		{"mongodb://u:p%40ss@m1:27017,m2:27017/shop?retryWrites=true&directConnection=false", "rs1/h1:27018,h2:27018",
			"mongodb://u:p%40ss@h1:27018,h2:27018/shop?retryWrites=true&replicaSet=rs1"},
		{"mongodb+srv://u:p@cluster0.example.net/?appName=x", "atlas-shard-0/s0.example.net:27017",
			"mongodb://u:p@s0.example.net:27017/?appName=x&tls=true&authSource=admin&replicaSet=atlas-shard-0"},
		{"mongodb://127.0.0.1:27117/", "shard0/127.0.0.1:33617", "mongodb://127.0.0.1:33617/?replicaSet=shard0"},
	} {
		if got := shardURI(config.MongoURI(tc.uri), tc.host); got != tc.want {
			t.Errorf("shardURI(%s, %s) = %s, want %s", tc.uri, tc.host, got, tc.want)
		}
	}
}
