package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"gopkg.in/yaml.v3"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
)

// Config is a parsed and validated configuration file. Every field holds
// its value or its default; see the package documentation for the schema.
type Config struct {
	Listen   string   `yaml:"listen"`
	Log      Log      `yaml:"log"`
	Shutdown Shutdown `yaml:"shutdown"`
	State    State    `yaml:"state"`
	Tracing  Tracing  `yaml:"tracing"`
	Streams  []Stream `yaml:"streams"`
}

// Tracing configures OpenTelemetry traces (package ferryotel). Tracing is
// off unless Endpoint is set or the standard OTEL_EXPORTER_OTLP_ENDPOINT /
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables are.
type Tracing struct {
	// Endpoint is the collector's OTLP/HTTP base URL (http://collector:4318);
	// it overrides OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string `yaml:"endpoint,omitempty"`
	// ServiceName is the service.name of the spans unless OTEL_SERVICE_NAME
	// sets one (default "ferry").
	ServiceName string `yaml:"service_name,omitempty"`
}

// Shutdown says how `ferry run` stops after SIGTERM (a redeploy, a
// scale-in). GracePeriod is the time the platform allows between SIGTERM
// and SIGKILL: Cloud Run's 10 s, Kubernetes' terminationGracePeriodSeconds.
// Each partition lets the deliveries in flight finish within DrainTimeout;
// a request still running then is cut off (its event is not checkpointed,
// and the partition's next owner delivers it again). Then ferry records
// what the sink acknowledged (ledger, at most 2 s), writes the final
// checkpoints and releases its leases, so DrainTimeout plus ShutdownReserve
// must fit in GracePeriod.
type Shutdown struct {
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	GracePeriod  time.Duration `yaml:"grace_period"`
}

// Log configures the daemon's log/slog output.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn or error
	Format string `yaml:"format"` // json or text
}

// State says where checkpoints, leases, members, the ledger and dead
// letters live: a MongoDB database, or (Bolt set) one local file.
type State struct {
	URI      MongoURI `yaml:"uri,omitempty"`
	Database string   `yaml:"database,omitempty"`
	Bolt     *Bolt    `yaml:"bolt,omitempty"`
}

// Bolt is an embedded single-file state store for single-instance runs.
type Bolt struct {
	Path string `yaml:"path"`
}

// Stream is one change stream delivered to one sink.
type Stream struct {
	Name          string                  `yaml:"name"`
	Source        Source                  `yaml:"source"`
	Group         Group                   `yaml:"group"`
	Delivery      Delivery                `yaml:"delivery"`
	Retry         Retry                   `yaml:"retry"`
	OnPoison      ferry.PoisonPolicy      `yaml:"on_poison"`
	OnHistoryLost ferry.HistoryLostPolicy `yaml:"on_history_lost"`
	OnInvalidate  ferry.InvalidatePolicy  `yaml:"on_invalidate"`
	// Oversize: what happens to an event the server cannot return even
	// split (fail, dead-letter, drop-images; default fail).
	Oversize ferry.OversizePolicy `yaml:"oversize"`
	Queue    Queue                `yaml:"queue"`
	Batch    Batch                `yaml:"batch"`
	Verify   Verify               `yaml:"verify"`
	Snapshot Snapshot             `yaml:"snapshot"`
	Sink     Sink                 `yaml:"sink"`
}

// Source is what a stream watches and how.
type Source struct {
	URI                      MongoURI `yaml:"uri"`
	Scope                    Scope    `yaml:"scope"`
	Pipeline                 Pipeline `yaml:"pipeline,omitempty"`
	FullDocument             string   `yaml:"full_document,omitempty"`
	FullDocumentBeforeChange string   `yaml:"full_document_before_change,omitempty"`
	ShowExpandedEvents       bool     `yaml:"show_expanded_events"`
	// SplitLargeEvents: events over 16 MB are split by the server and
	// reassembled by ferry (default true; on servers that have it).
	SplitLargeEvents bool    `yaml:"split_large_events"`
	StartAt          StartAt `yaml:"start_at"`
}

// Scope is a collection (Database and Collection set), a database
// (Collection empty) or the whole cluster (Cluster true).
type Scope struct {
	Database   string `yaml:"database,omitempty"`
	Collection string `yaml:"collection,omitempty"`
	Cluster    bool   `yaml:"cluster,omitempty"`
}

// StartAt is where a stream without a checkpoint begins: "now",
// "backfill", a time (Time set, Kind "time"), or where another stream's
// checkpoints are ({checkpoints_of: name}: Kind "checkpoints", Stream
// set), the lossless start of a new definition.
type StartAt struct {
	Kind   string    // now, backfill, time or checkpoints
	Time   time.Time // for Kind "time"
	Stream string    // for Kind "checkpoints"
}

// MarshalYAML writes the start position as it is written in the file.
func (s StartAt) MarshalYAML() (any, error) {
	switch s.Kind {
	case "time":
		return s.Time.UTC().Format(time.RFC3339Nano), nil
	case startAtCheckpoints:
		return map[string]string{"checkpoints_of": s.Stream}, nil
	}
	return s.Kind, nil
}

// Group configures the consumer group of a stream.
type Group struct {
	Partitions int           `yaml:"partitions"`
	LeaseTTL   time.Duration `yaml:"lease_ttl"`
	MemberID   string        `yaml:"member_id,omitempty"` // empty: lease.DefaultMemberID; must be unique per process
	// Partitioning is how documents are split among the partitions:
	// ferry.HashRange or ferry.HashMod; empty: not set (a new stream gets
	// HashRange, one that checkpointed under HashMod keeps it).
	Partitioning ferry.Partitioning `yaml:"partitioning,omitempty"`
}

// Delivery configures the delivery mode.
type Delivery struct {
	Mode group.Mode `yaml:"mode"`
}

// Retry configures how a failed delivery is retried.
type Retry struct {
	MaxAttempts    int           `yaml:"max_attempts"`
	InitialBackoff time.Duration `yaml:"initial_backoff"`
	MaxBackoff     time.Duration `yaml:"max_backoff"`
	HandlerTimeout time.Duration `yaml:"handler_timeout"`
	// MaxElapsed bounds how long one event is retried, sink outage or not
	// (0, "off": no bound, the default). See ferry.RetryMaxElapsed.
	MaxElapsed time.Duration `yaml:"max_elapsed"`
}

// Verify configures the daemon's periodic reconciliation of the stream
// (what `ferry verify` does, exported as ferry_verify_missing and
// ferry_verify_last_run_timestamp).
type Verify struct {
	// Interval between runs (0, "off": never, the default; at least 1m).
	Interval time.Duration `yaml:"interval"`
	// Window is how far back each run reads (default DefaultVerifyWindow,
	// at least 1m; a window the oplog does not hold starts at the
	// oplog's start).
	Window time.Duration `yaml:"window"`
}

// Snapshot paces the stream's snapshots: the first load of start_at:
// backfill, the recovery of on_history_lost: backfill and the operator's
// `ferry snapshot` requests (ferry.SnapshotChunkSize, SnapshotMaxRate,
// SnapshotPollInterval).
type Snapshot struct {
	// ChunkSize is the documents a partition reads per chunk: the unit
	// that is read at one cluster time, checkpointed, and read again
	// after a crash.
	ChunkSize int `yaml:"chunk_size"`
	// MaxRate caps each partition's snapshot reads, in documents per
	// second (0: no cap).
	MaxRate float64 `yaml:"max_rate"`
	// PollInterval is how often each partition's owner reads the state
	// store for an operator's request or cancellation.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// Batch bounds what a lane hands its sink in one Write (ferry.BatchSize,
// BatchBytes, BatchLinger): the events ready, up to Events of them and
// Bytes of raw BSON, waiting up to Linger for more (0: what is ready).
type Batch struct {
	Events int           `yaml:"events"`
	Bytes  int64         `yaml:"bytes"`
	Linger time.Duration `yaml:"linger"`
}

// Queue bounds the events read but not yet delivered.
type Queue struct {
	Events int   `yaml:"events"`
	Bytes  int64 `yaml:"bytes"`
}

// Sink is where a stream's events go: exactly one of its fields is set,
// and Type names it.
type Sink struct {
	Type    string   `yaml:"-"` // one of SinkTypes
	Webhook *Webhook `yaml:"webhook,omitempty"`
	Stdout  *Stdout  `yaml:"stdout,omitempty"`
	MongoDB *MongoDB `yaml:"mongodb,omitempty"`
	NATS    *NATS    `yaml:"nats,omitempty"`
	Kafka   *Kafka   `yaml:"kafka,omitempty"`
	PubSub  *PubSub  `yaml:"pubsub,omitempty"`
}

// PubSub publishes each event to a Google Cloud Pub/Sub topic
// (sink/pubsub) with the event id in the ferry-event-id attribute and the
// documentKey as ordering key. Credentials come from Application Default
// Credentials; Emulator connects to an emulator without TLS or credentials.
type PubSub struct {
	Project  string        `yaml:"project"`            // project id
	Topic    string        `yaml:"topic"`              // topic id, or projects/<project>/topics/<id>
	Endpoint string        `yaml:"endpoint,omitempty"` // host:port of a regional endpoint
	Emulator string        `yaml:"emulator,omitempty"` // host:port of an emulator
	Encoding string        `yaml:"encoding"`           // canonical or relaxed Extended JSON
	Timeout  time.Duration `yaml:"timeout"`            // per publish, until Pub/Sub's ack
}

// NATS publishes each event to NATS JetStream (sink/natsjs) with the event
// id as Nats-Msg-Id, so the stream's duplicate window drops replays.
type NATS struct {
	URL      string        `yaml:"url"`      // may hold credentials: redacted in Redacted output
	Subject  string        `yaml:"subject"`  // template with {db} {coll} {op}
	Encoding string        `yaml:"encoding"` // canonical or relaxed Extended JSON
	Timeout  time.Duration `yaml:"timeout"`
}

// Kafka produces each event to a Kafka topic (sink/kafka) with the
// idempotent producer, keyed by the documentKey, with the event id in the
// ferry-event-id header for receivers to de-duplicate replays.
type Kafka struct {
	Brokers  []string      `yaml:"brokers"`  // seed brokers, host:port
	Topic    string        `yaml:"topic"`    // Kafka's topic name rules
	Encoding string        `yaml:"encoding"` // canonical or relaxed Extended JSON
	Timeout  time.Duration `yaml:"timeout"`  // per produce, until the broker's ack
	ClientID string        `yaml:"client_id"`
	TLS      bool          `yaml:"tls"`
	SASL     *KafkaSASL    `yaml:"sasl,omitempty"`
}

// KafkaSASL authenticates the Kafka client. Password is a Secret: it is
// redacted in Redacted output and in fmt.
type KafkaSASL struct {
	Mechanism string `yaml:"mechanism"` // plain, scram-sha-256 or scram-sha-512
	User      string `yaml:"user"`
	Password  Secret `yaml:"password"`
}

// SASL mechanisms of the kafka sink.
const (
	KafkaSASLPlain       = "plain"
	KafkaSASLScramSHA256 = "scram-sha-256"
	KafkaSASLScramSHA512 = "scram-sha-512"
)

// MongoDB maintains a projection of the source in a collection of the
// state store's cluster (sink/mongoproj): with delivery.mode transactional,
// each change's effect happens exactly once.
type MongoDB struct {
	Database   string `yaml:"database"`
	Collection string `yaml:"collection"`
	// TombstoneRetention is how long a delete's tombstone is kept at least
	// (tombstone_retention, default DefaultTombstoneRetention); `ferry run`
	// purges it after that, once every partition's checkpoint is past the
	// delete. 0 (tombstone_retention: off): never purged.
	TombstoneRetention time.Duration `yaml:"tombstone_retention"`
}

// Tombstone retention of the mongodb sink.
const (
	DefaultTombstoneRetention = 24 * time.Hour
	MinTombstoneRetention     = time.Minute
)

// Sink types.
const (
	SinkWebhook = "webhook"
	SinkStdout  = "stdout"
	SinkMongoDB = "mongodb"
	SinkNATS    = "nats"
	SinkKafka   = "kafka"
	SinkPubSub  = "pubsub"
)

// SinkTypes lists the known sink types.
var SinkTypes = []string{SinkKafka, SinkMongoDB, SinkNATS, SinkPubSub, SinkStdout, SinkWebhook}

// Webhook POSTs each event to URL, signed with Secret (Standard Webhooks).
type Webhook struct {
	URL      string            `yaml:"url"`
	Secret   Secret            `yaml:"secret"`
	Timeout  time.Duration     `yaml:"timeout"`
	Encoding string            `yaml:"encoding"` // canonical or relaxed Extended JSON
	Headers  map[string]string `yaml:"headers,omitempty"`
}

// Stdout writes each event as one line of Extended JSON to standard output.
type Stdout struct {
	Encoding string `yaml:"encoding"` // canonical or relaxed Extended JSON
}

// Defaults.
const (
	DefaultListen = ":8080"
	// DefaultDrainTimeout is shutdown.drain_timeout's default.
	DefaultDrainTimeout = 8 * time.Second
	// DefaultGracePeriod is shutdown.grace_period's default: Cloud Run's
	// 10 s between SIGTERM and SIGKILL.
	DefaultGracePeriod = 10 * time.Second
	// ShutdownReserve is what a stop needs after the drain: the ledger
	// write of what the sink acknowledged (bounded by 2 s), the final
	// checkpoints and the lease releases.
	ShutdownReserve        = 2 * time.Second
	DefaultLogLevel        = "info"
	DefaultLogFormat       = "json"
	DefaultStateDatabase   = "ferry"
	DefaultPartitions      = 1
	DefaultLeaseTTL        = 10 * time.Second
	DefaultMaxAttempts     = 5
	DefaultInitialBackoff  = 100 * time.Millisecond
	DefaultMaxBackoff      = 30 * time.Second
	DefaultHandlerTimeout  = 30 * time.Second
	DefaultQueueEvents     = 4_000
	DefaultQueueBytes      = 64 << 20
	DefaultBatchEvents     = ferry.DefaultBatchSize
	DefaultBatchBytes      = ferry.DefaultBatchBytes
	MaxBatchLinger         = 10 * time.Second
	DefaultVerifyWindow    = time.Hour
	DefaultWebhookTimeout  = 10 * time.Second
	DefaultWebhookEncoding = "canonical"
	DefaultStdoutEncoding  = "relaxed"
	DefaultKafkaTimeout    = 10 * time.Second
	DefaultKafkaEncoding   = "relaxed"
	DefaultKafkaClientID   = "ferry"
	DefaultPubSubTimeout   = 10 * time.Second
	DefaultPubSubEncoding  = "relaxed"
	MinLeaseTTL            = 100 * time.Millisecond
	maxStreamNameLen       = 100
	maxFileSize            = 4 << 20
	defaultDeliveryMode    = group.AtLeastOnce
	defaultOnPoison        = ferry.PoisonDeadLetter
	defaultOnHistoryLost   = ferry.HistoryLostFail
	defaultOnInvalidate    = ferry.InvalidateStop
	defaultStartAt         = "now"
	startAtBackfill        = "backfill"
	startAtTime            = "time"
	startAtCheckpoints     = "checkpoints"
	fullDocumentDefault    = "default"
	fullDocumentBeforeOff  = "off"
	encodingCanonical      = "canonical"
	encodingRelaxed        = "relaxed"
)

// Snapshot pacing (the snapshot block of a stream).
const (
	// DefaultSnapshotChunk is snapshot.chunk_size's default.
	DefaultSnapshotChunk = ferry.DefaultSnapshotChunk
	// MaxSnapshotChunk bounds snapshot.chunk_size (ferry.SnapshotChunkSize's bound).
	MaxSnapshotChunk = 1_000_000
	// DefaultSnapshotPoll and MinSnapshotPoll are snapshot.poll_interval's
	// default and least value (each poll is one read of the state store
	// per partition).
	DefaultSnapshotPoll = 2 * time.Second
	MinSnapshotPoll     = 100 * time.Millisecond
	maxSnapshotRate     = 1e9
)

// Problem is one thing wrong with a configuration, at Path (for example
// "streams[0].sink.webhook.url"; empty for the file as a whole).
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Error lists every problem found in a configuration file. Its text never
// contains secrets or URI credentials.
type Error struct {
	File     string // the file Load read; empty for Parse
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if len(e.Problems) == 1 {
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, "%d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// Load reads, parses and validates the file at path, expanding ${ENV}
// references from the process environment. It never connects to anything:
// it is what `ferry validate` runs. Every error is an *Error. Without
// options every variable the file refers to must be set (or have a
// default); Unused relaxes that for the parts a command does not read.
func Load(path string, opts ...LoadOption) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Problems: []Problem{{Message: "cannot read the file: " + describeOSError(err)}}}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, &Error{File: path, Problems: []Problem{{Message: "cannot read the file: " + describeOSError(err)}}}
	}
	if len(data) > maxFileSize {
		return nil, &Error{File: path, Problems: []Problem{{Message: fmt.Sprintf("the file is larger than %d bytes", maxFileSize)}}}
	}
	cfg, err := Parse(data, os.LookupEnv, opts...)
	var e *Error
	if errors.As(err, &e) {
		e.File = path
	}
	return cfg, err
}

func describeOSError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse parses and validates a configuration, expanding ${NAME} and
// ${NAME:-default} in scalar values with env (nil: no variables are set).
// It collects every problem: the error, an *Error, lists them all.
func Parse(data []byte, env func(string) (string, bool), opts ...LoadOption) (*Config, error) {
	root, err := parseYAML(data)
	if err != nil {
		return nil, &Error{Problems: []Problem{{Message: err.Error()}}}
	}
	var lc loadConfig
	for _, o := range opts {
		if o != nil {
			o(&lc)
		}
	}
	d := &decoder{env: env}
	if len(lc.unused) > 0 {
		d.unused = func(path string) bool { return underAny(path, lc.unused) }
	}
	cfg := d.config(root)
	problems := d.problems
	if len(d.unset) > 0 {
		// What an unset variable left empty is not checked either (such as
		// "is required" at the same key).
		problems = nil
		for _, p := range d.problems {
			if !underAny(p.Path, d.unset) {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return cfg, nil
}

// A LoadOption adjusts Load and Parse for a command that reads only part
// of the configuration.
type LoadOption func(*loadConfig)

type loadConfig struct{ unused []string }

// Unused names parts of the file the command does not read, as paths in
// which "streams[]" stands for every stream: "listen",
// "streams[].group.member_id", "streams[].sink". An unset ${NAME} (one
// without a default) there is not a problem: the value keeps its default
// and the checks that need it are skipped. An unset variable anywhere
// else is still an error naming it. ferry's read-only commands (status,
// dlq list, verify, position, reset) load the file so, and need neither
// the sink's secrets nor group.member_id.
func Unused(paths ...string) LoadOption {
	return func(c *loadConfig) { c.unused = append(c.unused, paths...) }
}

// underAny reports whether path is one of prefixes or below one, with
// every "[<n>]" of path matching a "[]" or the same "[<n>]" in a prefix.
func underAny(path string, prefixes []string) bool {
	for _, pre := range prefixes {
		if pathUnder(path, pre) {
			return true
		}
	}
	return false
}

func pathUnder(path, prefix string) bool {
	i, j := 0, 0
	for j < len(prefix) {
		if i >= len(path) {
			return false
		}
		if strings.HasPrefix(prefix[j:], "[]") && path[i] == '[' {
			end := strings.IndexByte(path[i:], ']')
			if end < 0 {
				return false
			}
			i += end + 1
			j += 2
			continue
		}
		if path[i] != prefix[j] {
			return false
		}
		i++
		j++
	}
	return i == len(path) || path[i] == '.' || path[i] == '['
}

// parseYAML returns the single document's root node.
func parseYAML(data []byte) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil { // a YAML parser bug must not crash the daemon
			root, err = nil, fmt.Errorf("not valid YAML")
		}
	}()
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("the configuration is empty")
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, errors.New("the configuration is empty")
		}
		return nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, errors.New("the file must hold exactly one YAML document (found a second ---)")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || isNull(doc.Content[0]) {
		return nil, errors.New("the configuration is empty")
	}
	return doc.Content[0], nil
}

// Stream returns the stream named name, or nil.
func (c *Config) Stream(name string) *Stream {
	for i := range c.Streams {
		if c.Streams[i].Name == name {
			return &c.Streams[i]
		}
	}
	return nil
}

// Redacted returns the configuration as YAML, defaults filled in, with URI
// credentials, secret URI options, webhook secrets, webhook URL passwords,
// credential-looking header values, NATS URL credentials and Kafka SASL
// passwords replaced by "REDACTED". It is safe to log.
func (c *Config) Redacted() string {
	out, err := yaml.Marshal(c)
	if err != nil {
		return "(unprintable configuration)"
	}
	return string(out)
}

// String returns Redacted, so printing a Config never leaks secrets.
func (c *Config) String() string { return c.Redacted() }

// Pipeline is a list of aggregation stages, in order, keys in document
// order. It marshals to YAML as relaxed Extended JSON values.
type Pipeline []bson.D

// MarshalYAML writes the stages as relaxed Extended JSON, for Redacted.
func (p Pipeline) MarshalYAML() (any, error) {
	var out []any
	for _, st := range p {
		b, err := bson.MarshalExtJSON(st, false, false)
		if err != nil {
			out = append(out, "(unprintable stage)")
			continue
		}
		var n yaml.Node
		if yaml.Unmarshal(b, &n) != nil || len(n.Content) != 1 {
			out = append(out, "(unprintable stage)")
			continue
		}
		out = append(out, n.Content[0])
	}
	return out, nil
}

// MarshalYAML writes the webhook with its secret, URL password and
// credential-looking header values redacted.
func (w Webhook) MarshalYAML() (any, error) {
	type plain Webhook
	c := plain(w)
	c.URL = redactHTTPURL(w.URL)
	if len(w.Headers) > 0 {
		c.Headers = make(map[string]string, len(w.Headers))
		for k, v := range w.Headers {
			if looksSecret(k) {
				v = Redaction
			}
			c.Headers[k] = v
		}
	}
	return c, nil
}

// MarshalYAML writes the NATS sink with the credentials of its server URLs
// (user:password@ or token@) redacted.
func (n NATS) MarshalYAML() (any, error) {
	type plain NATS
	c := plain(n)
	c.URL = redactNATSURL(n.URL)
	return c, nil
}

// MarshalYAML writes the scope as it is written in the file.
func (s Scope) MarshalYAML() (any, error) {
	switch {
	case s.Cluster:
		return map[string]bool{"cluster": true}, nil
	case s.Collection != "":
		return map[string]string{"collection": s.Database + "." + s.Collection}, nil
	}
	return map[string]string{"database": s.Database}, nil
}
