package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// serve runs the command with args in the background and returns its
// connection string, the writer of its stdin and its exit status.
func serve(t *testing.T, args ...string) (uri string, stdin io.WriteCloser, status <-chan int) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		code := run(args, inR, outW, &stderr)
		outW.Close()
		done <- code
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no connection string: %v (stderr %q)", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	t.Cleanup(func() {
		inW.Close()
		<-exited
	})
	return strings.TrimSpace(line), inW, done
}

func connect(t *testing.T, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestFlags: the flags configure the server (release, frozen clock, test
// controls), and with -exit-on-stdin-eof closing stdin stops it with
// status 0.
func TestFlags(t *testing.T) {
	uri, stdin, status := serve(t, "-addr", "127.0.0.1:0", "-server-version", "8.2.1",
		"-frozen-clock", "2026-03-01T09:00:00Z", "-test-controls", "-exit-on-stdin-eof")
	admin := connect(t, uri).Database("admin")
	var bi struct {
		Version string `bson:"version"`
	}
	if err := admin.RunCommand(testCtx(t), bson.D{{Key: "buildInfo", Value: 1}}).Decode(&bi); err != nil || bi.Version != "8.2.1" {
		t.Fatalf("buildInfo version %q (%v); want 8.2.1", bi.Version, err)
	}
	var now struct {
		UnixNanos int64 `bson:"unixNanos"`
	}
	for _, cmd := range []string{"ferryTestNow", "ferryTestNow", "ferryTestAdvanceClock"} {
		if err := admin.RunCommand(testCtx(t), bson.D{{Key: cmd, Value: 1500}}).Decode(&now); err != nil {
			t.Fatal(err)
		}
	}
	want := time.Date(2026, 3, 1, 9, 0, 1, 500_000_000, time.UTC)
	if got := time.Unix(0, now.UnixNanos).UTC(); !got.Equal(want) {
		t.Fatalf("frozen clock after ferryTestAdvanceClock 1500: %v, want %v", got, want)
	}
	stdin.Close()
	select {
	case code := <-status:
		if code != 0 {
			t.Fatalf("exit status %d after stdin closed, want 0", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server still runs 20s after its stdin was closed")
	}
}

// TestDeploymentFlags: -server-version with an older release, -profile
// atlas-shared and -user reach the server: the split stage is refused as
// 5.0 and as Atlas refuse it, and with -user a client must log in and has
// its role's privileges only.
func TestDeploymentFlags(t *testing.T) {
	split := mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}
	for _, tc := range []struct {
		flag, value string
		code        int32
	}{{"-server-version", "5.0.0", 40324}, {"-profile", "atlas-shared", 8000}, {"-profile", "standalone", 40573}} {
		uri, _, _ := serve(t, "-addr", "127.0.0.1:0", "-exit-on-stdin-eof", tc.flag, tc.value)
		_, err := connect(t, uri).Database("d").Collection("c").Watch(testCtx(t), split)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s %s: watch with the split stage: %v; want code %d", tc.flag, tc.value, err, tc.code)
		}
	}
	uri, _, _ := serve(t, "-addr", "127.0.0.1:0", "-exit-on-stdin-eof", "-user", "reader:pw:read@shop,clusterMonitor@admin")
	err := connect(t, uri).Database("shop").Collection("c").FindOne(testCtx(t), bson.D{}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 13 {
		t.Errorf("find without credentials: %v; want Unauthorized (13)", err)
	}
	reader := connect(t, strings.Replace(uri, "mongodb://", "mongodb://reader:pw@", 1))
	if err := reader.Database("shop").Collection("c").FindOne(testCtx(t), bson.D{}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Errorf("find as reader: %v; want no documents", err)
	}
	var se mongo.ServerError
	if _, err := reader.Database("shop").Collection("c").InsertOne(testCtx(t), bson.D{}); !errors.As(err, &se) || !se.HasErrorCode(13) {
		t.Errorf("insert as reader: %v; want Unauthorized (13)", err)
	}
}

// TestTestControlsOff: without -test-controls the test-control commands
// are refused, naming the flag.
func TestTestControlsOff(t *testing.T) {
	uri, _, _ := serve(t, "-addr", "127.0.0.1:0", "-exit-on-stdin-eof")
	err := connect(t, uri).Database("admin").RunCommand(testCtx(t), bson.D{{Key: "ferryTestAdvanceClock", Value: 1000}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 59 || !strings.Contains(ce.Message, "-test-controls") {
		t.Fatalf("ferryTestAdvanceClock without -test-controls: %v; want CommandNotFound (59) naming -test-controls", err)
	}
}

// TestBadFlags: a bad value fails with status 2 and a message naming the
// flag; nothing is served.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-frozen-clock", "yesterday"}, "-frozen-clock"},
		{[]string{"-server-version", "4.2.0"}, "-server-version \"4.2.0\": releases from 4.4 to 8.x"},
		{[]string{"-profile", "documentdb"}, "-profile \"documentdb\": known profiles: atlas-shared, standalone"},
		{[]string{"-user", "bob"}, "invalid value \"bob\" for flag -user"},
		{[]string{"-user", "bob:pw:god@admin"}, "-user \"bob\": unknown role \"god\""},
		{[]string{"-oplog-entries", "0"}, "-oplog-entries must be at least 1"},
		{[]string{"-secondaries", "-1"}, "-secondaries must not be negative"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"-addr", "127.0.0.1:0"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want a failure naming %s", tc.args, code, stdout.String(), stderr.String(), tc.want)
		}
	}
}

// TestShards: -shards 2 serves a mongos (hello says isdbgrid) in front of
// two shards (listShards); a bad count is refused naming the flag.
func TestShards(t *testing.T) {
	uri, _, _ := serve(t, "-addr", "127.0.0.1:0", "-shards", "2", "-mongoses", "2", "-noop-interval", "200ms", "-exit-on-stdin-eof")
	if hosts := strings.Count(strings.TrimPrefix(uri, "mongodb://"), ","); hosts != 1 {
		t.Fatalf("URI %s; want two mongos hosts", uri)
	}
	admin := connect(t, uri).Database("admin")
	var hello struct {
		Msg     string `bson:"msg"`
		SetName string `bson:"setName"`
	}
	if err := admin.RunCommand(testCtx(t), bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil || hello.Msg != "isdbgrid" || hello.SetName != "" {
		t.Fatalf("hello %+v (%v); want a mongos (msg isdbgrid, no setName)", hello, err)
	}
	var shards struct {
		Shards []struct {
			ID string `bson:"_id"`
		} `bson:"shards"`
	}
	if err := admin.RunCommand(testCtx(t), bson.D{{Key: "listShards", Value: 1}}).Decode(&shards); err != nil || len(shards.Shards) != 2 {
		t.Fatalf("listShards %+v (%v); want 2 shards", shards, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-shards", "-1"}, "-shards must not be negative"},
		{[]string{"-balancer-interval", "1s"}, "-balancer-interval needs -shards"},
		{[]string{"-mongoses", "2"}, "-mongoses needs -shards"},
		{[]string{"-shards", "1", "-mongoses", "0"}, "-mongoses must be at least 1"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"-addr", "127.0.0.1:0"}, tc.args...), strings.NewReader(""), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: status %d, stderr %q; want a failure naming %s", tc.args, code, stderr.String(), tc.want)
		}
	}
}
