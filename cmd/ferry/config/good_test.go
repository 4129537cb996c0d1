package config_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint/boltstore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
)

const full = `
listen: "127.0.0.1:9090"
log: {level: debug, format: text}
shutdown: {drain_timeout: 20s, grace_period: 30s}   # Kubernetes: terminationGracePeriodSeconds 30
state:
  uri: mongodb://state:${DB_PASSWORD}@statedb:27017/?authSource=admin
  database: ferry_state
streams:
  - name: orders
    source:
      uri: mongodb+srv://ferry:${DB_PASSWORD}@cluster0.example.net/?retryWrites=true
      scope: {collection: shop.orders.v2}
      pipeline:
        - $match:
            operationType: {$in: [insert, update]}
            fullDocument.total: {$gte: 10.5}
            fullDocument.tenant: ${TENANT}
        - $sort: {z: 1, a: -1, m: 1}
        - $limit: ${LIMIT:-25}
        - $project: {big: 9999999999, flag: true, none: null, id: {$oid: "507f1f77bcf86cd799439011"}, quoted: "${LIMIT:-25}"}
      full_document: updateLookup
      full_document_before_change: whenAvailable
      show_expanded_events: true
      start_at: 2024-05-01T12:00:00.5Z
    group: {partitions: 8, lease_ttl: 15s, member_id: "${HOSTNAME:-member-1}"}
    delivery: {mode: idempotent}
    retry: {max_attempts: 7, initial_backoff: 250ms, max_backoff: 1m, handler_timeout: 5s}
    on_poison: stall
    on_history_lost: backfill
    on_invalidate: restart
    queue: {events: 500, bytes: 8MiB}
    batch: {events: 50, bytes: 1MiB, linger: 5ms}
    snapshot: {chunk_size: 250, max_rate: 12.5, poll_interval: 500ms}
    sink:
      webhook:
        url: https://user:hook-url-pass@hooks.example.com/ferry?token=abc
        secret: ${HOOK_SECRET}
        timeout: 3s
        encoding: relaxed
        headers: {x-api-key: "${HOOK_SECRET}", x-source: ferry}
  - name: audit
    source:
      uri: mongodb+srv://ferry:${DB_PASSWORD}@cluster0.example.net/?retryWrites=true
      scope: {cluster: true}
      start_at: backfill
    sink: {stdout: }
`

func TestFullConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(full), testEnv(map[string]string{"TENANT": "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	srcURI := config.MongoURI("mongodb+srv://ferry:" + dbPassword + "@cluster0.example.net/?retryWrites=true")
	want := &config.Config{
		Listen:   "127.0.0.1:9090",
		Log:      config.Log{Level: "debug", Format: "text"},
		Shutdown: config.Shutdown{DrainTimeout: 20 * time.Second, GracePeriod: 30 * time.Second},
		State:    config.State{URI: config.MongoURI("mongodb://state:" + dbPassword + "@statedb:27017/?authSource=admin"), Database: "ferry_state"},
		Streams: []config.Stream{{
			Name: "orders",
			Source: config.Source{
				URI:   srcURI,
				Scope: config.Scope{Database: "shop", Collection: "orders.v2"},
				Pipeline: config.Pipeline{
					{{Key: "$match", Value: bson.D{
						{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update"}}}},
						{Key: "fullDocument.total", Value: bson.D{{Key: "$gte", Value: 10.5}}},
						{Key: "fullDocument.tenant", Value: "acme"},
					}}},
					{{Key: "$sort", Value: bson.D{{Key: "z", Value: int32(1)}, {Key: "a", Value: int32(-1)}, {Key: "m", Value: int32(1)}}}},
					{{Key: "$limit", Value: int32(25)}},
					{{Key: "$project", Value: bson.D{
						{Key: "big", Value: int64(9999999999)},
						{Key: "flag", Value: true},
						{Key: "none", Value: nil},
						{Key: "id", Value: mustOID(t, "507f1f77bcf86cd799439011")},
						{Key: "quoted", Value: "25"},
					}}},
				},
				FullDocument:             "updateLookup",
				FullDocumentBeforeChange: "whenAvailable",
				ShowExpandedEvents:       true,
				SplitLargeEvents:         true,
				StartAt:                  config.StartAt{Kind: "time", Time: time.Date(2024, 5, 1, 12, 0, 0, 5e8, time.UTC)},
			},
			Group:         config.Group{Partitions: 8, LeaseTTL: 15 * time.Second, MemberID: "member-1"},
			Delivery:      config.Delivery{Mode: group.Idempotent},
			Retry:         config.Retry{MaxAttempts: 7, InitialBackoff: 250 * time.Millisecond, MaxBackoff: time.Minute, HandlerTimeout: 5 * time.Second},
			OnPoison:      ferry.PoisonStall,
			OnHistoryLost: ferry.HistoryLostBackfill,
			OnInvalidate:  ferry.InvalidateRestart,
			Oversize:      ferry.OversizeFail,
			Queue:         config.Queue{Events: 500, Bytes: 8 << 20},
			Batch:         config.Batch{Events: 50, Bytes: 1 << 20, Linger: 5 * time.Millisecond},
			Verify:        config.Verify{Window: time.Hour},
			Snapshot:      config.Snapshot{ChunkSize: 250, MaxRate: 12.5, PollInterval: 500 * time.Millisecond},
			Sink: config.Sink{Type: "webhook", Webhook: &config.Webhook{
				URL:      "https://user:hook-url-pass@hooks.example.com/ferry?token=abc",
				Secret:   config.Secret(hookSecret),
				Timeout:  3 * time.Second,
				Encoding: "relaxed",
				Headers:  map[string]string{"X-Api-Key": hookSecret, "X-Source": "ferry"},
			}},
		}, {
			Name:          "audit",
			Source:        config.Source{URI: srcURI, Scope: config.Scope{Cluster: true}, StartAt: config.StartAt{Kind: "backfill"}, SplitLargeEvents: true},
			Group:         config.Group{Partitions: 1, LeaseTTL: 10 * time.Second},
			Delivery:      config.Delivery{Mode: group.AtLeastOnce},
			Retry:         config.Retry{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second, HandlerTimeout: 30 * time.Second},
			OnPoison:      ferry.PoisonDeadLetter,
			OnHistoryLost: ferry.HistoryLostFail,
			OnInvalidate:  ferry.InvalidateStop,
			Oversize:      ferry.OversizeFail,
			Queue:         config.Queue{Events: 4000, Bytes: 64 << 20},
			Batch:         config.Batch{Events: 100, Bytes: 4 << 20},
			Verify:        config.Verify{Window: time.Hour},
			Snapshot:      config.Snapshot{ChunkSize: 1000, PollInterval: 2 * time.Second},
			Sink:          config.Sink{Type: "stdout", Stdout: &config.Stdout{Encoding: "relaxed"}},
		}},
	}
	if !reflect.DeepEqual(cfg, want) {
		for i := range want.Streams {
			if !reflect.DeepEqual(cfg.Streams[i], want.Streams[i]) {
				t.Errorf("stream %d:\n got %#v\nwant %#v", i, cfg.Streams[i].Source.Pipeline, want.Streams[i].Source.Pipeline)
			}
		}
		t.Fatalf("config differs:\n got %+v\nwant %+v", cfg, want)
	}
	if got := cfg.Stream("audit"); got != &cfg.Streams[1] {
		t.Errorf("Stream(audit) = %p", got)
	}
	if cfg.StateURI() != cfg.State.URI {
		t.Errorf("StateURI = %v", cfg.StateURI())
	}
}

func mustOID(t *testing.T, s string) bson.ObjectID {
	id, err := bson.ObjectIDFromHex(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestDefaults(t *testing.T) {
	cfg, err := config.Parse([]byte(minimal), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Streams[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.Listen, ":8080"},
		{"log", cfg.Log, config.Log{Level: "info", Format: "json"}},
		{"shutdown", cfg.Shutdown, config.Shutdown{DrainTimeout: 8 * time.Second, GracePeriod: 10 * time.Second}},
		{"state", cfg.State, config.State{Database: "ferry"}},
		{"state uri", cfg.StateURI(), s.Source.URI},
		{"start_at", s.Source.StartAt, config.StartAt{Kind: "now"}},
		{"group", s.Group, config.Group{Partitions: 1, LeaseTTL: 10 * time.Second}},
		{"mode", s.Delivery.Mode, group.AtLeastOnce},
		{"retry", s.Retry, config.Retry{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second, HandlerTimeout: 30 * time.Second}},
		{"policies", []string{string(s.OnPoison), string(s.OnHistoryLost), string(s.OnInvalidate)}, []string{"dead-letter", "fail", "stop"}},
		{"queue", s.Queue, config.Queue{Events: 4000, Bytes: 64 << 20}},
		{"batch", s.Batch, config.Batch{Events: 100, Bytes: 4 << 20}},
		{"snapshot", s.Snapshot, config.Snapshot{ChunkSize: 1000, MaxRate: 0, PollInterval: 2 * time.Second}},
		{"webhook", *s.Sink.Webhook, config.Webhook{URL: "https://hooks.example.com/ferry", Secret: config.Secret(hookSecret), Timeout: 10 * time.Second, Encoding: "canonical"}},
		{"pipeline", len(s.Source.Pipeline), 0},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	bolt, err := config.Parse([]byte("state: {bolt: {path: /var/lib/ferry.db}}\n"+strings.Replace(minimal, "    sink:", "    on_poison: stall\n    sink:", 1)), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if bolt.State.Bolt == nil || bolt.State.Bolt.Path != "/var/lib/ferry.db" || bolt.State.Database != "" || bolt.State.URI != "" {
		t.Errorf("bolt state = %+v", bolt.State)
	}
	if bolt.StateURI() != "" {
		t.Errorf("StateURI with bolt = %q", bolt.StateURI())
	}
}

func TestPipelineKeyOrder(t *testing.T) {
	// Many keys, so that any map in the path would scramble them.
	var keys []string
	for i := 0; i < 40; i++ {
		keys = append(keys, fmt.Sprintf("k%02d", (i*17)%40))
	}
	var y strings.Builder
	y.WriteString("      pipeline:\n        - $sort:\n")
	for _, k := range keys {
		fmt.Fprintf(&y, "            %s: 1\n", k)
	}
	doc := strings.Replace(minimal, "      scope:", y.String()+"      scope:", 1)
	cfg, err := config.Parse([]byte(doc), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	sort := cfg.Streams[0].Source.Pipeline[0][0].Value.(bson.D)
	var got []string
	for _, e := range sort {
		got = append(got, e.Key)
	}
	if !reflect.DeepEqual(got, keys) {
		t.Errorf("key order\n got %v\nwant %v", got, keys)
	}
	// The order survives into the consumer's stream identity: a different
	// order is a different stream.
	swapped := strings.Replace(doc, "k00: 1\n            k17: 1", "k17: 1\n            k00: 1", 1)
	if swapped == doc {
		t.Fatal("test edit did not apply")
	}
	cfg2, err := config.Parse([]byte(swapped), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if identity(t, &cfg.Streams[0], ferry.OnPoison(ferry.PoisonStall)) == identity(t, &cfg2.Streams[0], ferry.OnPoison(ferry.PoisonStall)) {
		t.Error("swapping two $sort keys did not change the stream identity")
	}
}

func TestEnvExpansion(t *testing.T) {
	env := testEnv(map[string]string{"EMPTY": "", "PORT_X": "9999", "DOLLAR": "$x"})
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"${PORT_X}", "9999"},
		{"a-${PORT_X}-b", "a-9999-b"},
		{"${UNSET:-fallback}", "fallback"},
		{"${EMPTY:-fallback}", "fallback"},
		{"${EMPTY}", ""},
		{"${UNSET:-}", ""},
		{"$${PORT_X}", "${PORT_X}"},
		{"$fullDocument.a", "$fullDocument.a"},
		{"${DOLLAR}{PORT_X}", "$x{PORT_X}"}, // no re-expansion of values
		{"${PORT_X:-a:-b}", "9999"},
		{"${UNSET:-a:-b}", "a:-b"},
	}
	for _, c := range cases {
		doc := strings.Replace(minimal, "name: orders", "name: orders\n    group: {member_id: \""+c.in+"\"}", 1)
		cfg, err := config.Parse([]byte(doc), env)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got := cfg.Streams[0].Group.MemberID; got != c.want {
			t.Errorf("%q expanded to %q, want %q", c.in, got, c.want)
		}
	}
	// Keys are not expanded; a value that expands to a number is typed by
	// the field (a duration field wants a duration).
	cfg, err := config.Parse([]byte(strings.Replace(minimal, "    sink:", "    group: {partitions: \"${PORT_X}\"}\n    sink:", 1)), env)
	if err != nil || cfg.Streams[0].Group.Partitions != 9999 {
		t.Errorf("partitions from env: %v %v", cfg, err)
	}
	// A nil env means no variables are set.
	_, err = config.Parse([]byte(minimal), nil)
	if err == nil || !strings.Contains(err.Error(), "streams[0].source.uri: environment variable DB_PASSWORD is not set") {
		t.Errorf("nil env: %v", err)
	}
}

func TestRedaction(t *testing.T) {
	// Secrets in the file itself (not only from the environment) are
	// redacted as well.
	doc := strings.NewReplacer("${DB_PASSWORD}", "db-secret-in-file", "${HOOK_SECRET}", hookSecretInFile).Replace(full)
	cfg, err := config.Parse([]byte(doc), testEnv(map[string]string{"TENANT": "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"Redacted": cfg.Redacted(),
		"%v":       fmt.Sprintf("%v", cfg),
		"%+v":      fmt.Sprintf("%+v", cfg.Streams),
		"%#v":      fmt.Sprintf("%#v", cfg.Streams[0]),
		"%s":       fmt.Sprintf("%s %s", cfg.State.URI, cfg.Streams[0].Sink.Webhook.Secret),
	}
	for name, out := range outputs {
		for _, secret := range []string{"db-secret-in-file", strings.TrimPrefix(hookSecretInFile, "whsec_"), "hook-url-pass", "token=abc"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s leaks %q:\n%s", name, secret, out)
			}
		}
	}
	red := cfg.Redacted()
	for _, want := range []string{
		"uri: mongodb+srv://REDACTED@cluster0.example.net/?retryWrites=true",
		"uri: mongodb://REDACTED@statedb:27017/?authSource=admin",
		"secret: REDACTED",
		"X-Api-Key: REDACTED",
		"X-Source: ferry",
		"lease_ttl: 15s",
		"collection: shop.orders.v2",
	} {
		if !strings.Contains(red, want) {
			t.Errorf("Redacted lacks %q:\n%s", want, red)
		}
	}
	if got := cfg.Streams[0].Sink.Webhook.Secret.Reveal(); got != hookSecretInFile {
		t.Errorf("Reveal = %q", got)
	}
	if got := cfg.State.URI.Reveal(); !strings.Contains(got, "db-secret-in-file") {
		t.Errorf("Reveal = %q", got)
	}
	// Invalid values of secret-bearing fields are not echoed.
	for _, bad := range []string{
		strings.Replace(doc, "mongodb+srv://ferry:db-secret-in-file@cluster0", "mongo://ferry:db-secret-in-file@cluster0", 1),
		strings.Replace(doc, "mongodb+srv://ferry:db-secret-in-file@cluster0", "mongodb+srv://ferry:db-secret-in-file@a,b", 1),
		strings.Replace(doc, "https://user:hook-url-pass@", "https//user:hook-url-pass@", 1),
		strings.Replace(doc, "x-source: ferry", "x-source: \""+hookSecretInFile+"\\n\"", 1),
	} {
		_, err := config.Parse([]byte(bad), testEnv(map[string]string{"TENANT": "acme"}))
		if err == nil {
			t.Fatalf("no error for %s", bad)
		}
		checkNoSecrets(t, err.Error())
		if strings.Contains(err.Error(), "hook-url-pass") {
			t.Errorf("error leaks the URL password: %v", err)
		}
	}
}

// identity builds a consumer from the stream's options and returns its
// stream identity digest (no connection is made).
func identity(t *testing.T, s *config.Stream, extra ...ferry.Option) string {
	t.Helper()
	c, err := consumer(t, s, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return c.Identity()
}

func consumer(t *testing.T, s *config.Stream, extra ...ferry.Option) (*ferry.Consumer, error) {
	t.Helper()
	opts, err := s.ConsumerOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	opts = append(opts, ferry.Checkpoints(store), ferry.Partition(0, s.Group.Partitions))
	opts = append(opts, extra...)
	return ferry.NewConsumer(client(t), func(context.Context, *ferry.Event) error { return nil }, opts...)
}

func client(t *testing.T) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1").SetServerSelectionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// TestConsumerOptions checks the mapping onto ferry options: the stream
// definition (scope, pipeline, change-stream options) gives the same
// identity as the options written by hand, and every other value reaches
// the consumer (an invalid value is rejected by ferry's own validation,
// naming the option).
func TestConsumerOptions(t *testing.T) {
	cfg, err := config.Parse([]byte(full), testEnv(map[string]string{"TENANT": "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	s := &cfg.Streams[0]
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	byHand, err := ferry.NewConsumer(client(t), func(context.Context, *ferry.Event) error { return nil },
		ferry.Stream("orders"), ferry.WatchCollection("shop", "orders.v2"), ferry.Pipeline(s.Source.Pipeline...),
		ferry.FullDocument("updateLookup"), ferry.FullDocumentBeforeChange("whenAvailable"), ferry.ShowExpandedEvents(true),
		ferry.Checkpoints(store), ferry.Partition(0, 8), ferry.OnPoison(ferry.PoisonStall))
	if err != nil {
		t.Fatal(err)
	}
	if got := identity(t, s); got != byHand.Identity() {
		t.Errorf("identity %s, want %s", got, byHand.Identity())
	}
	for _, other := range []func(*config.Stream){
		func(s *config.Stream) { s.Source.Scope = config.Scope{Database: "shop"} },
		func(s *config.Stream) { s.Source.Scope = config.Scope{Cluster: true} },
		func(s *config.Stream) { s.Source.FullDocument = "" },
		func(s *config.Stream) { s.Source.FullDocumentBeforeChange = "off" },
		func(s *config.Stream) { s.Source.ShowExpandedEvents = false },
		func(s *config.Stream) { s.Source.Pipeline = s.Source.Pipeline[1:] },
		func(s *config.Stream) { s.Name = "orders2" },
	} {
		c := *s
		other(&c)
		if identity(t, &c) == byHand.Identity() {
			t.Errorf("a changed definition %+v kept the identity", c.Source)
		}
	}
	// Values that are not part of the identity reach the consumer: make
	// each one invalid and expect ferry to name it.
	for _, tc := range []struct {
		edit func(*config.Stream)
		want string
	}{
		{func(s *config.Stream) { s.Retry.MaxAttempts = 0 }, "Retry: maxAttempts"},
		{func(s *config.Stream) { s.Retry.MaxBackoff = time.Millisecond }, "Retry: need 0 < min <= max"},
		{func(s *config.Stream) { s.Retry.HandlerTimeout = 0 }, "HandlerTimeout"},
		{func(s *config.Stream) { s.Queue.Events = 0 }, "QueueLimit"},
		{func(s *config.Stream) { s.Queue.Bytes = 0 }, "QueueLimit"},
		{func(s *config.Stream) { s.OnPoison = "x" }, "OnPoison"},
		{func(s *config.Stream) { s.OnPoison = ferry.PoisonDeadLetter }, "DeadLetters"},
		{func(s *config.Stream) { s.OnHistoryLost = "x" }, "OnHistoryLost"},
		{func(s *config.Stream) { s.OnInvalidate = "x" }, "OnInvalidate"},
		{func(s *config.Stream) { s.Snapshot.ChunkSize = 2_000_000 }, "SnapshotChunkSize"},
		{func(s *config.Stream) { s.Snapshot.MaxRate = -1 }, "SnapshotMaxRate"},
		{func(s *config.Stream) { s.Snapshot.PollInterval = -time.Second }, "SnapshotPollInterval"},
	} {
		c := *s
		tc.edit(&c)
		if _, err := consumer(t, &c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want a consumer error naming %q, got %v", tc.want, err)
		}
	}
	// The batch values reach a batch consumer: each one invalid is named.
	batchConsumer := func(c *config.Stream) error {
		opts, err := c.ConsumerOptions(nil)
		if err != nil {
			t.Fatal(err)
		}
		store, err := boltstore.Open(filepath.Join(t.TempDir(), "cp.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		opts = append(opts, ferry.Checkpoints(store), ferry.Partition(0, c.Group.Partitions))
		_, err = ferry.NewBatchConsumer(client(t), func(context.Context, []*ferry.Event) error { return nil }, append(opts, c.BatchOptions()...)...)
		return err
	}
	if err := batchConsumer(s); err != nil {
		t.Errorf("batch consumer of the stream: %v", err)
	}
	for _, tc := range []struct {
		edit func(*config.Stream)
		want string
	}{
		{func(s *config.Stream) { s.Batch.Events = 0 }, "BatchSize"},
		{func(s *config.Stream) { s.Batch.Bytes = 0 }, "BatchBytes"},
		{func(s *config.Stream) { s.Batch.Linger = -time.Second }, "BatchLinger"},
	} {
		c := *s
		tc.edit(&c)
		if err := batchConsumer(&c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want a batch consumer error naming %q, got %v", tc.want, err)
		}
	}
	// A stream built by hand with no scope is refused by ConsumerOptions.
	if _, err := (&config.Stream{Name: "x"}).ConsumerOptions(nil); err == nil || !strings.Contains(err.Error(), "source.scope") {
		t.Errorf("no scope: %v", err)
	}
	if _, err := (&config.Stream{Name: "x", Source: config.Source{Scope: config.Scope{Database: "d"}, StartAt: config.StartAt{Kind: "time"}}}).ConsumerOptions(nil); err == nil {
		t.Error("zero start time accepted")
	}
}

func TestStartAtTimestamp(t *testing.T) {
	cfg, err := config.Parse([]byte(full), testEnv(map[string]string{"TENANT": "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Streams[0]
	if got := s.Source.StartAt.Time.Unix(); got != 1714564800 {
		t.Errorf("start time %d", got)
	}
	if s.Source.StartAt.Time.Unix() > math.MaxUint32 {
		t.Error("out of range")
	}
	for _, v := range []string{"1969-12-31T23:59:59Z", "2200-01-01T00:00:00Z"} {
		_, err := config.Parse([]byte(strings.Replace(minimal, "      scope:", "      start_at: "+v+"\n      scope:", 1)), testEnv(nil))
		if err == nil || !strings.Contains(err.Error(), "streams[0].source.start_at: the time must be") {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestGroupOptions(t *testing.T) {
	cfg, err := config.Parse([]byte(full), testEnv(map[string]string{"TENANT": "acme"}))
	if err != nil {
		t.Fatal(err)
	}
	cl := client(t)
	handler := func(context.Context, *ferry.Event) error { return nil }
	s := cfg.Streams[0]
	// group.New checks the consumer options too: pass the stream's (none
	// when the stream is invalid, so that group.New reports it).
	newGroup := func(s config.Stream) (*group.Group, error) {
		copts, _ := s.GroupConsumerOptions(nil)
		return group.New(cl, handler, append(s.GroupOptions(), group.StateDatabase(cl.Database("ferry")), group.ConsumerOptions(copts...))...)
	}
	g, err := newGroup(s)
	if err != nil {
		t.Fatal(err)
	}
	if g.MemberID() != "member-1" {
		t.Errorf("member id %q", g.MemberID())
	}
	for _, tc := range []struct {
		edit func(*config.Stream)
		want string
	}{
		{func(s *config.Stream) { s.Group.Partitions = 0 }, "Partitions"},
		{func(s *config.Stream) { s.Group.LeaseTTL = time.Millisecond }, "LeaseTTL"},
		{func(s *config.Stream) { s.Delivery.Mode = "x" }, "DeliveryMode"},
		{func(s *config.Stream) { s.Name = "" }, "Name"},
	} {
		c := s
		tc.edit(&c)
		_, err := newGroup(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want a group error naming %q, got %v", tc.want, err)
		}
	}
}

// TestPartitioning: group.partitioning parses, prints back as written,
// and reaches both the consumers (the stream's identity under it) and the
// group (an invalid value set by hand is named as group.Partitioning's).
// Unset, the consumers get none (a new stream runs hash-range, one that
// checkpointed under hash-mod keeps it).
func TestPartitioning(t *testing.T) {
	for _, p := range []ferry.Partitioning{ferry.HashRange, ferry.HashMod} {
		cfg, err := config.Parse([]byte(strings.Replace(minimal, "    sink:", "    group: {partitions: 4, partitioning: "+string(p)+"}\n    sink:", 1)), testEnv(nil))
		if err != nil {
			t.Fatal(err)
		}
		s := &cfg.Streams[0]
		if s.Group.Partitioning != p {
			t.Errorf("partitioning %q, want %q", s.Group.Partitioning, p)
		}
		if !strings.Contains(cfg.Redacted(), "partitioning: "+string(p)) {
			t.Errorf("the printed configuration lacks partitioning: %s:\n%s", p, cfg.Redacted())
		}
		c, err := consumer(t, s, ferry.OnPoison(ferry.PoisonStall))
		if err != nil {
			t.Fatal(err)
		}
		if c.Partitioning() != p || c.Identity() != identity(t, s, ferry.OnPoison(ferry.PoisonStall), ferry.WithPartitioning(p)) {
			t.Errorf("%s: the consumer runs %q with identity %s, want the stream's under %s", p, c.Partitioning(), c.Identity(), p)
		}
		if p == ferry.HashMod && c.Identity() == identity(t, s, ferry.OnPoison(ferry.PoisonStall), ferry.WithPartitioning(ferry.HashRange)) {
			t.Errorf("hash-mod and hash-range give the same identity")
		}
		cl := client(t)
		copts, _ := s.GroupConsumerOptions(nil)
		s.Group.Partitioning = "x"
		_, err = group.New(cl, func(context.Context, *ferry.Event) error { return nil },
			append(s.GroupOptions(), group.StateDatabase(cl.Database("ferry")), group.ConsumerOptions(copts...))...)
		if err == nil || !strings.Contains(err.Error(), `Partitioning: "x" is not a partitioning`) {
			t.Errorf("a group with partitioning x: %v", err)
		}
	}
	cfg, err := config.Parse([]byte(strings.Replace(minimal, "    sink:", "    group: {partitions: 4}\n    sink:", 1)), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := &cfg.Streams[0]
	if s.Group.Partitioning != "" || strings.Contains(cfg.Redacted(), "partitioning") {
		t.Errorf("unset partitioning parsed as %q", s.Group.Partitioning)
	}
	if opts, _ := s.ConsumerOptions(nil); slices.Contains(ferry.OptionNames(opts...), "WithPartitioning") {
		t.Error("an unset partitioning reaches the consumers as WithPartitioning")
	}
}

// TestStartAtCheckpointsOfAndMaxElapsed: the lossless start of a new
// definition and the explicit retry bound parse, print back as written,
// and reach the consumer options.
func TestStartAtCheckpointsOfAndMaxElapsed(t *testing.T) {
	cfg, err := config.Parse([]byte(`
streams:
  - name: orders-v2
    source:
      uri: mongodb://db1:27017/?replicaSet=rs0
      scope: {collection: shop.orders}
      start_at: {checkpoints_of: orders}
    retry: {max_elapsed: 10m}
    sink: {stdout: {}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := cfg.Streams[0]
	if st.Source.StartAt.Kind != "checkpoints" || st.Source.StartAt.Stream != "orders" || st.Retry.MaxElapsed != 10*time.Minute {
		t.Fatalf("start_at %+v, max_elapsed %v", st.Source.StartAt, st.Retry.MaxElapsed)
	}
	if !strings.Contains(cfg.Redacted(), "checkpoints_of: orders") {
		t.Fatalf("Redacted does not print the start position as written:\n%s", cfg.Redacted())
	}
	opts, err := st.ConsumerOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if from := ferry.StartOf(opts...).FromStream(); from != "orders" {
		t.Fatalf("consumer start position from %q, want orders", from)
	}
	off, err := config.Parse([]byte(`
streams:
  - name: s
    source: {uri: "mongodb://db1/?replicaSet=rs0", scope: {database: shop}}
    retry: {max_elapsed: off}
    sink: {stdout: {}}
`), nil)
	if err != nil || off.Streams[0].Retry.MaxElapsed != 0 {
		t.Fatalf("max_elapsed: off → %v, %v", err, off)
	}
}
