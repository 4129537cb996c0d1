package config

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/internal/mongoname"
	"github.com/ferry-io/ferry/internal/natssubject"
	"github.com/ferry-io/ferry/sink/kafka"
	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/webhook"
)

// config decodes the root mapping, fills in defaults and checks the rules
// that span several fields.
func (d *decoder) config(root *yaml.Node) *Config {
	c := &Config{
		Listen:   DefaultListen,
		Log:      Log{Level: DefaultLogLevel, Format: DefaultLogFormat},
		Shutdown: Shutdown{DrainTimeout: DefaultDrainTimeout, GracePeriod: DefaultGracePeriod},
	}
	var sawStreams bool
	ok := d.mapping("", root, map[string]field{
		"listen": func(p string, v *yaml.Node) { d.str(p, v, &c.Listen); d.checkListen(p, c.Listen) },
		"log": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"level":  func(p string, v *yaml.Node) { d.enum(p, v, &c.Log.Level, "debug", "info", "warn", "error") },
				"format": func(p string, v *yaml.Node) { d.enum(p, v, &c.Log.Format, "json", "text") },
			})
		},
		"shutdown": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"drain_timeout": func(p string, v *yaml.Node) { d.duration(p, v, &c.Shutdown.DrainTimeout, time.Nanosecond) },
				"grace_period":  func(p string, v *yaml.Node) { d.duration(p, v, &c.Shutdown.GracePeriod, time.Second) },
			})
		},
		"state":   func(p string, v *yaml.Node) { d.state(p, v, &c.State) },
		"tracing": func(p string, v *yaml.Node) { d.tracing(p, v, &c.Tracing) },
		"streams": func(p string, v *yaml.Node) { sawStreams = true; c.Streams = d.streams(p, v) },
	})
	if !ok {
		return c
	}
	if c.State.Bolt == nil && c.State.Database == "" {
		c.State.Database = DefaultStateDatabase
	}
	if !sawStreams {
		d.add("streams", "is required: list at least one stream")
	}
	d.crossChecks(c)
	d.checkPools(c)
	d.checkShutdown(c.Shutdown)
	return c
}

// checkShutdown checks that a stop fits the platform's grace period: the
// drain, then ShutdownReserve for the ledger, the checkpoints and the
// leases.
func (d *decoder) checkShutdown(s Shutdown) {
	if s.DrainTimeout+ShutdownReserve > s.GracePeriod {
		d.add("shutdown.drain_timeout", "%v plus %v to record, checkpoint and release the leases must fit in shutdown.grace_period (%v, the time between SIGTERM and SIGKILL: Cloud Run gives 10s): set drain_timeout to at most %v, or raise grace_period if your platform gives more (Kubernetes: terminationGracePeriodSeconds)",
			s.DrainTimeout, ShutdownReserve, s.GracePeriod, s.GracePeriod-ShutdownReserve)
	}
}

// tracing decodes the tracing mapping. The endpoint is an OTLP/HTTP URL
// without credentials (they go in OTEL_EXPORTER_OTLP_HEADERS).
func (d *decoder) tracing(path string, n *yaml.Node, t *Tracing) {
	d.mapping(path, n, map[string]field{
		"endpoint": func(p string, v *yaml.Node) {
			d.str(p, v, &t.Endpoint)
			if t.Endpoint == "" {
				return
			}
			u, err := url.Parse(t.Endpoint)
			switch {
			case err != nil || u.Host == "":
				d.add(p, "must be the collector's OTLP/HTTP URL, such as http://collector:4318")
			case u.Scheme != "http" && u.Scheme != "https":
				d.add(p, "the scheme must be http or https (OTLP over HTTP, port 4318), got %s", quote(u.Scheme))
			case u.User != nil:
				d.add(p, "must not hold user info: put credentials in OTEL_EXPORTER_OTLP_HEADERS")
			case u.RawQuery != "" || u.Fragment != "":
				d.add(p, "must not have a query or fragment")
			}
		},
		"service_name": func(p string, v *yaml.Node) { d.str(p, v, &t.ServiceName) },
	})
}

func (d *decoder) checkListen(path, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || strings.ContainsAny(host, " /") {
		d.add(path, "must be a host:port address such as \":8080\" or \"127.0.0.1:9090\", got %s", quote(addr))
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		d.add(path, "the port must be a number from 0 to 65535, got %s", quote(port))
	}
}

func (d *decoder) state(path string, n *yaml.Node, s *State) {
	var bolt *yaml.Node
	d.mapping(path, n, map[string]field{
		"uri": func(p string, v *yaml.Node) {
			var u string
			d.str(p, v, &u)
			if u == "" {
				return
			}
			if err := checkMongoURI(u); err != nil {
				d.add(p, "%v", err)
				return
			}
			s.URI = MongoURI(u)
		},
		"database": func(p string, v *yaml.Node) {
			d.str(p, v, &s.Database)
			if err := checkDatabaseName(s.Database); err != nil {
				d.add(p, "%v", err)
			}
		},
		"bolt": func(p string, v *yaml.Node) {
			bolt = v
			s.Bolt = &Bolt{}
			d.mapping(p, v, map[string]field{
				"path": func(p string, v *yaml.Node) { d.str(p, v, &s.Bolt.Path) },
			})
			if s.Bolt.Path == "" {
				d.add(join(p, "path"), "is required: the state file's path")
			}
		},
	})
	if bolt != nil && (s.URI != "" || s.Database != "") {
		d.add(path, "set either uri (and database) for a MongoDB state store, or bolt for a local file, not both")
	}
}

func (d *decoder) streams(path string, n *yaml.Node) []Stream {
	if n.Kind != yaml.SequenceNode {
		d.add(path, "must be a list of streams, got %s", kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		d.add(path, "is empty: list at least one stream")
	}
	out := make([]Stream, 0, len(n.Content))
	for i, e := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		if e = d.deref(p, e); e != nil {
			out = append(out, d.stream(p, e))
		}
	}
	return out
}

func (d *decoder) stream(path string, n *yaml.Node) Stream {
	s := Stream{
		Source:        Source{StartAt: StartAt{Kind: defaultStartAt}, SplitLargeEvents: true},
		Group:         Group{Partitions: DefaultPartitions, LeaseTTL: DefaultLeaseTTL},
		Delivery:      Delivery{Mode: defaultDeliveryMode},
		Retry:         Retry{MaxAttempts: DefaultMaxAttempts, InitialBackoff: DefaultInitialBackoff, MaxBackoff: DefaultMaxBackoff, HandlerTimeout: DefaultHandlerTimeout},
		OnPoison:      defaultOnPoison,
		OnHistoryLost: defaultOnHistoryLost,
		OnInvalidate:  defaultOnInvalidate,
		Oversize:      ferry.OversizeFail,
		Queue:         Queue{Events: DefaultQueueEvents, Bytes: DefaultQueueBytes},
		Batch:         Batch{Events: DefaultBatchEvents, Bytes: DefaultBatchBytes},
		Verify:        Verify{Window: DefaultVerifyWindow},
		Snapshot:      Snapshot{ChunkSize: DefaultSnapshotChunk, PollInterval: DefaultSnapshotPoll},
	}
	seen := map[string]bool{}
	ok := d.mapping(path, n, map[string]field{
		"name": func(p string, v *yaml.Node) {
			d.str(p, v, &s.Name)
			if s.Name != "" {
				if err := checkStreamName(s.Name); err != nil {
					d.add(p, "%v", err)
				}
			}
		},
		"source": func(p string, v *yaml.Node) { seen["source"] = true; d.source(p, v, &s.Source) },
		"group": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"partitions": func(p string, v *yaml.Node) { d.intField(p, v, &s.Group.Partitions, 1, 1<<20) },
				"lease_ttl":  func(p string, v *yaml.Node) { d.duration(p, v, &s.Group.LeaseTTL, MinLeaseTTL) },
				"member_id":  func(p string, v *yaml.Node) { d.str(p, v, &s.Group.MemberID) },
				"partitioning": func(p string, v *yaml.Node) {
					m := string(s.Group.Partitioning)
					d.enum(p, v, &m, string(ferry.HashRange), string(ferry.HashMod))
					s.Group.Partitioning = ferry.Partitioning(m)
				},
			})
		},
		"delivery": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"mode": func(p string, v *yaml.Node) {
					m := string(s.Delivery.Mode)
					d.enum(p, v, &m, string(group.AtLeastOnce), string(group.Idempotent), string(group.Transactional))
					s.Delivery.Mode = group.Mode(m)
				},
			})
		},
		"retry": func(p string, v *yaml.Node) {
			r := &s.Retry
			d.mapping(p, v, map[string]field{
				"max_attempts":    func(p string, v *yaml.Node) { d.intField(p, v, &r.MaxAttempts, 1, math.MaxInt32) },
				"initial_backoff": func(p string, v *yaml.Node) { d.duration(p, v, &r.InitialBackoff, time.Nanosecond) },
				"max_backoff":     func(p string, v *yaml.Node) { d.duration(p, v, &r.MaxBackoff, time.Nanosecond) },
				"handler_timeout": func(p string, v *yaml.Node) { d.duration(p, v, &r.HandlerTimeout, time.Nanosecond) },
				"max_elapsed": func(p string, v *yaml.Node) {
					if x, ok := d.scalar(p, v); ok && x == "off" {
						r.MaxElapsed = 0
						return
					}
					d.duration(p, v, &r.MaxElapsed, time.Second)
				},
			})
			if r.MaxBackoff < r.InitialBackoff {
				d.add(join(p, "max_backoff"), "must not be less than initial_backoff (%v), got %v", r.InitialBackoff, r.MaxBackoff)
			}
		},
		"on_poison": func(p string, v *yaml.Node) {
			x := string(s.OnPoison)
			d.enum(p, v, &x, string(ferry.PoisonDeadLetter), string(ferry.PoisonStall))
			s.OnPoison = ferry.PoisonPolicy(x)
		},
		"on_history_lost": func(p string, v *yaml.Node) {
			x := string(s.OnHistoryLost)
			d.enum(p, v, &x, string(ferry.HistoryLostFail), string(ferry.HistoryLostBackfill))
			s.OnHistoryLost = ferry.HistoryLostPolicy(x)
		},
		"on_invalidate": func(p string, v *yaml.Node) {
			x := string(s.OnInvalidate)
			d.enum(p, v, &x, string(ferry.InvalidateStop), string(ferry.InvalidateRestart))
			s.OnInvalidate = ferry.InvalidatePolicy(x)
		},
		"oversize": func(p string, v *yaml.Node) {
			x := string(s.Oversize)
			d.enum(p, v, &x, string(ferry.OversizeFail), string(ferry.OversizeDeadLetter), string(ferry.OversizeDropImages))
			s.Oversize = ferry.OversizePolicy(x)
		},
		"queue": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"events": func(p string, v *yaml.Node) { d.intField(p, v, &s.Queue.Events, 1, math.MaxInt32) },
				"bytes":  func(p string, v *yaml.Node) { d.size(p, v, &s.Queue.Bytes) },
			})
		},
		"batch": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"events": func(p string, v *yaml.Node) {
					seen["batch.events"] = true
					d.intField(p, v, &s.Batch.Events, 1, math.MaxInt32)
				},
				"bytes": func(p string, v *yaml.Node) { d.size(p, v, &s.Batch.Bytes) },
				"linger": func(p string, v *yaml.Node) {
					d.duration(p, v, &s.Batch.Linger, 0)
					if s.Batch.Linger > MaxBatchLinger {
						d.add(p, "must be at most %v (a lane waits this long for more events once it has one), got %v", MaxBatchLinger, s.Batch.Linger)
						s.Batch.Linger = MaxBatchLinger
					}
				},
			})
		},
		"verify": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"interval": func(p string, v *yaml.Node) {
					if x, ok := d.scalar(p, v); ok && x == "off" {
						s.Verify.Interval = 0
						return
					}
					d.duration(p, v, &s.Verify.Interval, time.Minute)
				},
				"window": func(p string, v *yaml.Node) { d.duration(p, v, &s.Verify.Window, time.Minute) },
			})
		},
		"snapshot": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"chunk_size": func(p string, v *yaml.Node) {
					d.intField(p, v, &s.Snapshot.ChunkSize, 1, MaxSnapshotChunk)
				},
				"max_rate": func(p string, v *yaml.Node) { d.rate(p, v, &s.Snapshot.MaxRate) },
				"poll_interval": func(p string, v *yaml.Node) {
					d.duration(p, v, &s.Snapshot.PollInterval, MinSnapshotPoll)
				},
			})
		},
		"sink": func(p string, v *yaml.Node) { seen["sink"] = true; d.sink(p, v, &s.Sink) },
	})
	if !ok {
		return s
	}
	if s.Batch.Events > s.Queue.Events {
		// A batch holds events of the queue: it can never be larger.
		if seen["batch.events"] {
			d.add(join(path, "batch.events"), "must not exceed queue.events (%d), got %d", s.Queue.Events, s.Batch.Events)
		}
		s.Batch.Events = s.Queue.Events
	}
	if s.Name == "" {
		d.add(join(path, "name"), "is required")
	}
	if !seen["source"] {
		d.add(join(path, "source"), "is required")
	}
	if !seen["sink"] {
		d.add(join(path, "sink"), "is required: choose one of %s", strings.Join(SinkTypes, ", "))
	}
	if st := s.Source.StartAt; st.Kind == startAtCheckpoints && st.Stream == s.Name && s.Name != "" {
		d.add(join(path, "source.start_at.checkpoints_of"), "names this stream itself; name the stream whose checkpoints the new definition starts from")
	}
	return s
}

func checkStreamName(name string) error {
	if len(name) > maxStreamNameLen {
		return fmt.Errorf("must be at most %d characters", maxStreamNameLen)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("may contain only letters, digits, '.', '_' and '-', got %s", quote(name))
		}
	}
	return nil
}

// checkDatabaseName and checkCollectionName apply package mongoname's
// rules, which the stores and the mongodb sink apply too.
func checkDatabaseName(db string) error { return mongoname.Database(db) }

func checkCollectionName(coll string) error {
	if err := mongoname.Collection(coll); err != nil {
		return fmt.Errorf("%v: not a collection a change stream can watch", err)
	}
	return nil
}

func (d *decoder) source(path string, n *yaml.Node, s *Source) {
	var uriSet, scopeSet bool
	d.mapping(path, n, map[string]field{
		"uri": func(p string, v *yaml.Node) {
			uriSet = true
			var u string
			d.str(p, v, &u)
			if u == "" {
				d.add(p, "is required: a mongodb:// or mongodb+srv:// connection string")
				return
			}
			if err := checkMongoURI(u); err != nil {
				d.add(p, "%v", err)
				return
			}
			s.URI = MongoURI(u)
		},
		"scope":    func(p string, v *yaml.Node) { scopeSet = true; d.scope(p, v, &s.Scope) },
		"pipeline": func(p string, v *yaml.Node) { s.Pipeline = d.pipeline(p, v) },
		"full_document": func(p string, v *yaml.Node) {
			d.enum(p, v, &s.FullDocument, fullDocumentDefault, "updateLookup", "whenAvailable", "required")
		},
		"full_document_before_change": func(p string, v *yaml.Node) {
			d.enum(p, v, &s.FullDocumentBeforeChange, fullDocumentBeforeOff, "whenAvailable", "required")
		},
		"show_expanded_events": func(p string, v *yaml.Node) { d.boolean(p, v, &s.ShowExpandedEvents) },
		"split_large_events":   func(p string, v *yaml.Node) { d.boolean(p, v, &s.SplitLargeEvents) },
		"start_at":             func(p string, v *yaml.Node) { d.startAt(p, v, &s.StartAt) },
	})
	if !uriSet {
		d.add(join(path, "uri"), "is required: a mongodb:// or mongodb+srv:// connection string")
	}
	if !scopeSet {
		d.add(join(path, "scope"), "is required: set one of collection: db.coll, database: db, cluster: true")
	}
}

func (d *decoder) scope(path string, n *yaml.Node, s *Scope) {
	var set []string
	d.mapping(path, n, map[string]field{
		"collection": func(p string, v *yaml.Node) {
			set = append(set, "collection")
			var ns string
			d.str(p, v, &ns)
			db, coll, ok := strings.Cut(ns, ".")
			if !ok {
				d.add(p, "must be database.collection, got %s", quote(ns))
				return
			}
			if err := checkDatabaseName(db); err != nil {
				d.add(p, "database: %v", err)
				return
			}
			if err := checkCollectionName(coll); err != nil {
				d.add(p, "%v", err)
				return
			}
			s.Database, s.Collection = db, coll
		},
		"database": func(p string, v *yaml.Node) {
			set = append(set, "database")
			var db string
			d.str(p, v, &db)
			if err := checkDatabaseName(db); err != nil {
				d.add(p, "%v", err)
				return
			}
			s.Database = db
		},
		"cluster": func(p string, v *yaml.Node) {
			set = append(set, "cluster")
			d.boolean(p, v, &s.Cluster)
			if !s.Cluster {
				d.add(p, "must be true to watch the whole cluster (or set collection or database instead)")
			}
		},
	})
	switch len(set) {
	case 0:
		d.add(path, "set one of collection: db.coll, database: db, cluster: true")
	case 1:
	default:
		d.add(path, "set exactly one of collection, database, cluster; got %s", strings.Join(set, " and "))
	}
}

func (d *decoder) startAt(path string, n *yaml.Node, s *StartAt) {
	if isNull(n) {
		return
	}
	if n.Kind == yaml.MappingNode {
		var from string
		ok := d.mapping(path, n, map[string]field{
			"checkpoints_of": func(p string, v *yaml.Node) {
				d.str(p, v, &from)
				if from == "" {
					d.add(p, "must name the stream whose checkpoints to start from")
				} else if err := checkStreamName(from); err != nil {
					d.add(p, "%v", err)
				}
			},
		})
		if ok && from == "" {
			d.add(path, "as a mapping, set checkpoints_of: <stream> (start where that stream's checkpoints are)")
		}
		*s = StartAt{Kind: startAtCheckpoints, Stream: from}
		return
	}
	v, ok := d.scalar(path, n)
	if !ok {
		return
	}
	switch v {
	case defaultStartAt, startAtBackfill:
		*s = StartAt{Kind: v}
		return
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		d.add(path, "must be now, backfill, an RFC 3339 time such as 2024-05-01T12:00:00Z, or {checkpoints_of: <stream>}, got %s", quote(v))
		return
	}
	if t.Unix() < 1 || t.Unix() > math.MaxUint32 {
		d.add(path, "the time must be after 1970-01-01T00:00:00Z and before 2106")
		return
	}
	*s = StartAt{Kind: startAtTime, Time: t}
}

func (d *decoder) sink(path string, n *yaml.Node, s *Sink) {
	if n.Kind != yaml.MappingNode {
		d.add(path, "must be a mapping with one sink type (%s), got %s", strings.Join(SinkTypes, ", "), kindName(n))
		return
	}
	var types []string
	for _, kv := range d.pairs(path, n, 0) {
		k := kv[0]
		p := join(path, k.Value)
		v := d.deref(p, kv[1])
		if v == nil {
			continue
		}
		switch k.Value {
		case SinkWebhook:
			types = append(types, k.Value)
			s.Webhook = d.webhook(p, v)
		case SinkStdout:
			types = append(types, k.Value)
			s.Stdout = d.stdout(p, v)
		case SinkMongoDB:
			types = append(types, k.Value)
			s.MongoDB = d.mongodbSink(p, v)
		case SinkNATS:
			types = append(types, k.Value)
			s.NATS = d.natsSink(p, v)
		case SinkKafka:
			types = append(types, k.Value)
			s.Kafka = d.kafkaSink(p, v)
		case SinkPubSub:
			types = append(types, k.Value)
			s.PubSub = d.pubsubSink(p, v)
		default:
			d.add(p, "unknown sink type (known types: %s)", strings.Join(SinkTypes, ", "))
		}
	}
	switch len(types) {
	case 0:
		if len(n.Content) == 0 {
			d.add(path, "choose one sink type: %s", strings.Join(SinkTypes, ", "))
		}
	case 1:
		s.Type = types[0]
	default:
		d.add(path, "set exactly one sink type, got %s", strings.Join(types, " and "))
	}
}

func (d *decoder) webhook(path string, n *yaml.Node) *Webhook {
	w := &Webhook{Timeout: DefaultWebhookTimeout, Encoding: DefaultWebhookEncoding}
	if isNull(n) {
		n = &yaml.Node{Kind: yaml.MappingNode}
	}
	var urlSet, secretSet bool
	d.mapping(path, n, map[string]field{
		"url": func(p string, v *yaml.Node) {
			d.str(p, v, &w.URL)
			if w.URL == "" {
				return
			}
			urlSet = true
			if err := webhook.CheckURL(w.URL); err != nil {
				d.add(p, "%v", err)
			}
		},
		"secret": func(p string, v *yaml.Node) {
			var s string
			d.str(p, v, &s)
			w.Secret, secretSet = Secret(s), s != ""
			if secretSet {
				if _, err := webhook.DecodeSecret(s); err != nil {
					d.add(p, "%v", err)
				}
			}
		},
		"timeout":  func(p string, v *yaml.Node) { d.duration(p, v, &w.Timeout, time.Nanosecond) },
		"encoding": func(p string, v *yaml.Node) { d.enum(p, v, &w.Encoding, encodingCanonical, encodingRelaxed) },
		"headers": func(p string, v *yaml.Node) {
			if isNull(v) {
				return
			}
			if v.Kind != yaml.MappingNode {
				d.add(p, "must be a mapping of header names to values, got %s", kindName(v))
				return
			}
			w.Headers = map[string]string{}
			for _, kv := range d.pairs(p, v, 0) {
				name := kv[0].Value
				hp := join(p, name)
				hv := d.deref(hp, kv[1])
				if hv == nil {
					continue
				}
				val, ok := d.scalar(hp, hv)
				if !ok {
					continue
				}
				// The webhook sink's rules (webhook.Header): `ferry validate`
				// refuses what the sink would.
				if err := webhook.CheckHeader(name, val); err != nil {
					d.add(hp, "%v", err)
					continue
				}
				w.Headers[http.CanonicalHeaderKey(name)] = val
			}
		},
	})
	if !urlSet {
		d.add(join(path, "url"), "is required: an absolute http(s) URL")
	}
	if !secretSet {
		d.add(join(path, "secret"), "is required: the shared signing secret (for example ${FERRY_WEBHOOK_SECRET})")
	}
	return w
}

func (d *decoder) mongodbSink(path string, n *yaml.Node) *MongoDB {
	m := &MongoDB{TombstoneRetention: DefaultTombstoneRetention}
	d.mapping(path, n, map[string]field{
		"database":   func(p string, v *yaml.Node) { d.str(p, v, &m.Database) },
		"collection": func(p string, v *yaml.Node) { d.str(p, v, &m.Collection) },
		"tombstone_retention": func(p string, v *yaml.Node) {
			if isNull(v) {
				return
			}
			s, ok := d.scalar(p, v)
			if !ok {
				return
			}
			if s == "off" {
				m.TombstoneRetention = 0
				return
			}
			before := len(d.problems)
			d.duration(p, v, &m.TombstoneRetention, math.MinInt64) // the bound is checked here, to mention off
			if len(d.problems) == before && m.TombstoneRetention < MinTombstoneRetention {
				d.add(p, "must be at least %v (a purge runs every quarter of it), or off to keep tombstones forever, got %s", MinTombstoneRetention, quote(s))
				m.TombstoneRetention = DefaultTombstoneRetention
			}
		},
	})
	// The names mongoproj.New accepts (package mongoname's rules).
	if m.Database == "" {
		d.add(join(path, "database"), "is required: the database of the projection collection (in the state store's cluster)")
	} else if err := mongoname.Database(m.Database); err != nil {
		d.add(join(path, "database"), "%v", err)
	}
	if m.Collection == "" {
		d.add(join(path, "collection"), "is required: the projection collection")
	} else if err := mongoname.Collection(m.Collection); err != nil {
		d.add(join(path, "collection"), "%v", err)
	}
	return m
}

func (d *decoder) natsSink(path string, n *yaml.Node) *NATS {
	s := &NATS{Subject: natssubject.Default, Encoding: encodingRelaxed, Timeout: 10 * time.Second}
	d.mapping(path, n, map[string]field{
		"url": func(p string, v *yaml.Node) { d.str(p, v, &s.URL) },
		"subject": func(p string, v *yaml.Node) {
			before := len(d.problems)
			d.str(p, v, &s.Subject)
			if len(d.problems) > before {
				return
			}
			if s.Subject == "" {
				d.add(p, "must not be empty: leave subject out for the default %s", natssubject.Default)
			} else if _, err := natssubject.Parse(s.Subject); err != nil {
				// The rules of sink/natsjs, which parses it the same way.
				d.add(p, "is not a valid subject template: %v; write '.'-separated literal tokens and the placeholders {db}, {coll} and {op}, such as %s", err, natssubject.Default)
			}
		},
		"encoding": func(p string, v *yaml.Node) { d.enum(p, v, &s.Encoding, encodingCanonical, encodingRelaxed) },
		"timeout":  func(p string, v *yaml.Node) { d.duration(p, v, &s.Timeout, time.Millisecond) },
	})
	if s.URL == "" {
		d.add(join(path, "url"), "is required: the NATS server URL, e.g. nats://127.0.0.1:4222")
	} else if err := checkNATSURL(s.URL); err != nil {
		d.add(join(path, "url"), "%v", err)
	}
	return s
}

func (d *decoder) kafkaSink(path string, n *yaml.Node) *Kafka {
	k := &Kafka{Encoding: DefaultKafkaEncoding, Timeout: DefaultKafkaTimeout, ClientID: DefaultKafkaClientID}
	if isNull(n) {
		n = &yaml.Node{Kind: yaml.MappingNode} // `kafka:`: report the required keys
	}
	var brokersSet bool
	reported := map[string]bool{} // keys whose value was wrong: not "required" as well
	ok := d.mapping(path, n, map[string]field{
		"brokers": func(p string, v *yaml.Node) { brokersSet = !isNull(v); k.Brokers = d.kafkaBrokers(p, v) },
		"topic": d.reporting(reported, "topic", func(p string, v *yaml.Node) {
			d.str(p, v, &k.Topic)
			if k.Topic == "" {
				return // reported as required below
			}
			if err := kafka.CheckTopic(k.Topic); err != nil {
				d.add(p, "%v", err)
			}
		}),
		"encoding": func(p string, v *yaml.Node) { d.enum(p, v, &k.Encoding, encodingCanonical, encodingRelaxed) },
		"timeout":  func(p string, v *yaml.Node) { d.duration(p, v, &k.Timeout, time.Millisecond) },
		"client_id": func(p string, v *yaml.Node) {
			if isNull(v) {
				return
			}
			d.str(p, v, &k.ClientID)
			if k.ClientID == "" {
				d.add(p, "must not be empty (leave client_id out for the default %s)", quote(DefaultKafkaClientID))
			} else if strings.ContainsFunc(k.ClientID, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				d.add(p, "must not contain control characters or line breaks")
			}
		},
		"tls":  func(p string, v *yaml.Node) { d.boolean(p, v, &k.TLS) },
		"sasl": func(p string, v *yaml.Node) { k.SASL = d.kafkaSASL(p, v) },
	})
	if !ok {
		return k
	}
	if !brokersSet {
		d.add(join(path, "brokers"), "is required: the seed brokers, a list of host:port addresses such as [\"kafka-1:9092\", \"kafka-2:9092\"]")
	}
	if k.Topic == "" && !reported["topic"] {
		d.add(join(path, "topic"), "is required: the topic every event is produced to, e.g. ferry.events")
	}
	return k
}

func (d *decoder) pubsubSink(path string, n *yaml.Node) *PubSub {
	s := &PubSub{Encoding: DefaultPubSubEncoding, Timeout: DefaultPubSubTimeout}
	if isNull(n) {
		n = &yaml.Node{Kind: yaml.MappingNode} // `pubsub:`: report the required keys
	}
	reported := map[string]bool{} // keys whose value was wrong: not "required" as well
	ok := d.mapping(path, n, map[string]field{
		"project": d.reporting(reported, "project", func(p string, v *yaml.Node) {
			d.str(p, v, &s.Project)
			if s.Project != "" {
				if err := pubsub.CheckProject(s.Project); err != nil {
					d.add(p, "%v", err)
				}
			}
		}),
		"topic": d.reporting(reported, "topic", func(p string, v *yaml.Node) { d.str(p, v, &s.Topic) }),
		"endpoint": func(p string, v *yaml.Node) {
			d.str(p, v, &s.Endpoint)
			if err := checkHostPort(s.Endpoint, "us-east1-pubsub.googleapis.com:443"); err != nil {
				d.add(p, "%v", err)
			}
		},
		"emulator": func(p string, v *yaml.Node) {
			d.str(p, v, &s.Emulator)
			if err := checkHostPort(s.Emulator, "localhost:8085"); err != nil {
				d.add(p, "%v", err)
			}
		},
		"encoding": func(p string, v *yaml.Node) { d.enum(p, v, &s.Encoding, encodingCanonical, encodingRelaxed) },
		"timeout":  func(p string, v *yaml.Node) { d.duration(p, v, &s.Timeout, time.Millisecond) },
	})
	if !ok {
		return s
	}
	if s.Project == "" && !reported["project"] {
		d.add(join(path, "project"), "is required: the Google Cloud project id of the topic, e.g. my-project")
	}
	switch {
	case s.Topic == "" && !reported["topic"]:
		d.add(join(path, "topic"), "is required: the topic id (e.g. ferry-events) or its full name projects/<project>/topics/<id>")
	case s.Topic != "":
		if err := pubsub.CheckTopic(s.Project, s.Topic); err != nil {
			d.add(join(path, "topic"), "%v", err)
		}
	}
	if s.Endpoint != "" && s.Emulator != "" {
		d.add(join(path, "emulator"), "cannot be combined with endpoint: the emulator is the endpoint (remove one)")
	}
	return s
}

// checkHostPort checks an optional host:port address.
func checkHostPort(a, example string) error {
	if a == "" {
		return fmt.Errorf("must not be empty: write host:port such as %s, or leave the key out", example)
	}
	if strings.Contains(a, "://") {
		return fmt.Errorf("must be host:port without a scheme, such as %s, got %s", example, quote(a))
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" || strings.ContainsAny(host, " /\t") {
		return fmt.Errorf("must be a host:port address such as %s, got %s", example, quote(a))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("the port must be a number from 1 to 65535, got %s", quote(port))
	}
	return nil
}

// kafkaBrokers decodes the list of seed brokers; a missing or null list is
// reported by the caller.
func (d *decoder) kafkaBrokers(path string, n *yaml.Node) []string {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.add(path, "must be a list of host:port addresses such as [\"kafka-1:9092\", \"kafka-2:9092\"], got %s", kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		d.add(path, "must list at least one seed broker (host:port)")
		return nil
	}
	var out []string
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		item = d.deref(p, item)
		if item == nil {
			continue
		}
		var b string
		if !isNull(item) {
			s, ok := d.scalar(p, item)
			if !ok {
				continue
			}
			b = s
		}
		if err := kafka.CheckBroker(b); err != nil {
			d.add(p, "%v", err)
			continue
		}
		out = append(out, b)
	}
	return out
}

// kafkaSASL decodes the SASL settings; the password is never echoed.
func (d *decoder) kafkaSASL(path string, n *yaml.Node) *KafkaSASL {
	if isNull(n) {
		return nil
	}
	s := &KafkaSASL{}
	var password string
	reported := map[string]bool{}
	ok := d.mapping(path, n, map[string]field{
		"mechanism": d.reporting(reported, "mechanism", func(p string, v *yaml.Node) {
			d.enum(p, v, &s.Mechanism, KafkaSASLPlain, KafkaSASLScramSHA256, KafkaSASLScramSHA512)
		}),
		"user":     d.reporting(reported, "user", func(p string, v *yaml.Node) { d.str(p, v, &s.User) }),
		"password": d.reporting(reported, "password", func(p string, v *yaml.Node) { d.str(p, v, &password) }),
	})
	s.Password = Secret(password)
	if !ok {
		return s
	}
	if s.Mechanism == "" && !reported["mechanism"] {
		d.add(join(path, "mechanism"), "is required: one of %s, %s, %s", KafkaSASLPlain, KafkaSASLScramSHA256, KafkaSASLScramSHA512)
	}
	if s.User == "" && !reported["user"] {
		d.add(join(path, "user"), "is required: the SASL user name")
	}
	if password == "" && !reported["password"] {
		d.add(join(path, "password"), "is required: the SASL password (for example ${FERRY_KAFKA_PASSWORD})")
	}
	return s
}

// reporting wraps a field's decoder to note in reported[key] that its value
// was reported as wrong, so the caller does not add "is required" on top.
func (d *decoder) reporting(reported map[string]bool, key string, f field) field {
	return func(p string, v *yaml.Node) {
		before := len(d.problems)
		f(p, v)
		reported[key] = len(d.problems) > before
	}
}

func (d *decoder) stdout(path string, n *yaml.Node) *Stdout {
	s := &Stdout{Encoding: DefaultStdoutEncoding}
	if isNull(n) || (n.Kind == yaml.MappingNode && len(n.Content) == 0) {
		return s // `stdout: {}` or `stdout:`
	}
	d.mapping(path, n, map[string]field{
		"encoding": func(p string, v *yaml.Node) { d.enum(p, v, &s.Encoding, encodingCanonical, encodingRelaxed) },
	})
	return s
}

// crossChecks applies the rules between streams and the state store.
func (d *decoder) crossChecks(c *Config) {
	names := map[string]int{}
	for i, s := range c.Streams {
		p := fmt.Sprintf("streams[%d]", i)
		if s.Name != "" {
			if j, dup := names[s.Name]; dup {
				d.add(join(p, "name"), "%s is already the name of streams[%d]; stream names must be unique", quote(s.Name), j)
			} else {
				names[s.Name] = i
			}
		}
		if s.Delivery.Mode == group.Transactional && s.Sink.Type != "" && s.Sink.Type != SinkMongoDB {
			d.add(join(p, "delivery.mode"), "transactional needs a sink whose writes go to the state store's MongoDB cluster; the %s sink cannot (use idempotent, or the mongodb sink)", s.Sink.Type)
		}
		if s.Sink.Type == SinkMongoDB {
			switch s.Source.FullDocument {
			case "updateLookup", "required":
			case "whenAvailable":
				d.add(join(p, "source.full_document"), "whenAvailable cannot be used with the mongodb sink: an update whose post-image was not recorded arrives without its full document, and the projection would miss that change; set updateLookup, or required (with changeStreamPreAndPostImages enabled on the collection)")
			default:
				d.add(join(p, "source.full_document"), "the mongodb sink needs the full document of updates: set updateLookup (or required with pre/post-images)")
			}
			if c.State.Bolt != nil {
				d.add(join(p, "sink.mongodb"), "the mongodb sink writes to the state store's cluster; it needs state.uri, not state.bolt")
			} else if s.Delivery.Mode == group.Transactional && c.State.URI != "" && c.State.URI.Reveal() != s.Source.URI.Reveal() {
				d.add(join(p, "delivery.mode"), "transactional with the mongodb sink needs the source and the state store on one cluster (the same URI), so the effect and the ledger share a transaction")
			}
		}
		if c.State.Bolt != nil {
			if s.Delivery.Mode != group.AtLeastOnce {
				d.add(join(p, "delivery.mode"), "%s needs a MongoDB state store (state.uri); state.bolt supports at-least-once only", s.Delivery.Mode)
			}
			if s.OnPoison == ferry.PoisonDeadLetter {
				d.add(join(p, "on_poison"), "dead-letter needs a MongoDB state store (state.uri) for the dead-letter collection; with state.bolt set on_poison: stall")
			}
		}
	}
	if c.State.Bolt == nil && c.State.URI == "" {
		// The state store defaults to the streams' source cluster, which
		// must then be one cluster.
		var first MongoURI
		for i, s := range c.Streams {
			if s.Source.URI == "" {
				continue
			}
			if first == "" {
				first = s.Source.URI
			} else if s.Source.URI != first {
				d.add("state.uri", "is required when streams read from different source URIs (streams[%d] differs from the first)", i)
				break
			}
		}
	}
}

// StateURI returns the MongoDB connection string of the state store: state.uri, or the
// streams' source URI when it is not set. It is empty with state.bolt.
func (c *Config) StateURI() MongoURI {
	if c.State.Bolt != nil {
		return ""
	}
	if c.State.URI != "" {
		return c.State.URI
	}
	if len(c.Streams) > 0 {
		return c.Streams[0].Source.URI
	}
	return ""
}
