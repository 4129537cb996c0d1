// Package config reads the ferry daemon's configuration file: one YAML
// document describing the HTTP listener, logging, the state store and the
// streams to deliver, each with its source, consumer group, delivery mode,
// retry and failure policies, queue limits and sink.
//
// # Guarantees
//
//   - Load and Parse never connect to anything (no MongoDB, no DNS lookup for
//     mongodb+srv, no HTTP): they are what `ferry validate -c ferry.yaml`
//     runs. A configuration they return is complete (defaults filled in) and
//     valid: it passes the checks the sinks make when `ferry run` builds
//     them (the webhook secret's format, reserved headers, the NATS subject
//     template, ...).
//   - Every problem is reported, not only the first, each with its path:
//     `streams[0].sink.webhook.url: must be an absolute http(s) URL`. The
//     error is an *Error listing Problems (Path, Message); Load prefixes the
//     file name. Unknown keys, keys defined twice, wrong types, out-of-range
//     values and missing required fields are all problems.
//   - Parse never panics, whatever the input; alias "bombs", recursive
//     aliases and deep nesting end with an error (a node budget bounds the
//     work).
//   - Errors never contain MongoDB URIs, URI credentials, webhook URLs, NATS
//     URLs or secrets (values of these fields are never echoed). Redacted
//     (and Config.String) prints the whole configuration with URI
//     credentials, credential-bearing URI options, webhook secrets, webhook
//     URL passwords, credential-looking header values, NATS URL credentials
//     (user:password@ or token@) and Kafka SASL passwords replaced by
//     "REDACTED". Secret and MongoURI values redact themselves
//     in fmt (%v, %+v, %#v) and YAML output; call Reveal to use them.
//
// # Environment variables
//
// After YAML parsing, every scalar value (not keys) has ${NAME} replaced by
// the environment variable NAME, and ${NAME:-default} by NAME or, when NAME
// is unset or empty, by default. An unset variable without a default is a
// problem naming the path and the variable. "$${" is a literal "${"; a "$"
// not followed by "{" is kept, so pipeline field paths ("$fullDocument.a")
// need no escaping. Substituted text is not expanded again, and defaults
// cannot nest other references. In a pipeline, a plain (unquoted) scalar is
// typed by what it expands to (`$limit: ${LIMIT:-25}` is the number 25); a
// quoted one stays a string.
//
// YAML anchors, aliases and merge keys (<<: *base) work everywhere, which
// helps share a source between streams.
//
// # Reference
//
// Durations are Go duration strings ("250ms", "10s", "1m30s"). Sizes are
// byte counts, optionally with a unit (KB, MB, GB = powers of 1000; KiB,
// MiB, GiB = powers of 1024). Every key but the ones marked required is
// optional.
//
//	listen: ":8080"
//	    Address of the HTTP server for /metrics, /healthz, /readyz, /status
//	    and the status page at /
//	    (host:port; default ":8080"). The daemon listens on ":$PORT" instead
//	    when the PORT environment variable is set (Cloud Run, Heroku).
//	log:
//	  level: info            debug | info | warn | error (default info)
//	  format: json           json | text (default json)
//	shutdown:                how `ferry run` stops after SIGTERM
//	  drain_timeout: 8s      how long each partition lets the deliveries in
//	                         flight finish (> 0; default 8s). A request still
//	                         running then is cut off: its event is not
//	                         checkpointed and the partition's next owner
//	                         delivers it again (a failed delivery is not
//	                         retried while draining either). What the sink
//	                         acknowledged is still recorded.
//	  grace_period: 10s      the time the platform gives between SIGTERM and
//	                         SIGKILL (>= 1s; default 10s, Cloud Run's;
//	                         Kubernetes: terminationGracePeriodSeconds).
//	                         drain_timeout + 2s (record, checkpoint, release
//	                         the leases) must fit in it.
//	tracing:                 OpenTelemetry traces (off unless an endpoint is
//	                         set here or in OTEL_EXPORTER_OTLP_ENDPOINT /
//	                         OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; the other
//	                         OTEL_* variables apply): a span per read batch
//	                         and per delivery, the traceparent sent on by
//	                         the sink (docs/tracing.md)
//	  endpoint: http://collector:4318
//	                         OTLP/HTTP base URL (no credentials: use
//	                         OTEL_EXPORTER_OTLP_HEADERS)
//	  service_name: ferry    service.name unless OTEL_SERVICE_NAME is set
//	state:                   where checkpoints, leases, members, the ledger
//	                         and dead letters live. Either:
//	  uri: mongodb://…       MongoDB connection string (default: the
//	                         streams' source URI, which must then be the
//	                         same for every stream). The user needs
//	                         readWrite on the database. ferry run gives the
//	                         state store a client of its own (see
//	                         "Connection pools" below).
//	  database: ferry        database name (default "ferry")
//	                         or, for single-instance runs:
//	  bolt:
//	    path: ferry.db       required: a local state file. With bolt,
//	                         delivery.mode must be at-least-once and
//	                         on_poison stall (no ledger, no dead-letter
//	                         collection, no leases: run one instance).
//	streams:                 required: a list of at least one stream
//	  - name: orders         required, unique; letters, digits, '.', '_',
//	                         '-', at most 100. Names the consumer group and
//	                         keys the checkpoints.
//	    source:              required
//	      uri: mongodb+srv://…  required: mongodb:// or mongodb+srv://
//	                         (the user needs changeStream and find); a
//	                         maxPoolSize in it must leave a connection per
//	                         partition (see "Connection pools" below)
//	      scope:             required, exactly one of:
//	        collection: db.coll   one collection (split at the first '.')
//	        database: db          every collection of a database
//	        cluster: true         every database
//	      pipeline:          stages after $changeStream, as YAML mappings,
//	        - $match: {…}    one operator key per stage. Key order is kept
//	                         (they become bson.D); values may use Extended
//	                         JSON ({$oid: …}, {$date: …}, {$numberLong: …}).
//	                         Integers become int32 when they fit, else int64.
//	                         Part of the stream identity.
//	      full_document: updateLookup   default | updateLookup |
//	                         whenAvailable | required (default: not sent)
//	      full_document_before_change: off   off | whenAvailable | required
//	                         (default off)
//	      show_expanded_events: false   DDL events (default false)
//	      split_large_events: true   events over 16 MB arrive split
//	                         ($changeStreamSplitLargeEvent, MongoDB 7.0 and
//	                         6.0.9+) and are reassembled: the sink gets one
//	                         whole event (default true; false is part of the
//	                         stream identity). Atlas shared tiers (M0, Flex)
//	                         refuse the stage: set false there (ferry check
//	                         tries it)
//	      start_at: now      where a stream without a checkpoint starts: now |
//	                         backfill (scan, then stream) | an RFC 3339 time
//	                         (startAtOperationTime, whole seconds: events of
//	                         that second onwards) | {checkpoints_of: S}:
//	                         where stream S's checkpoints are (the oldest
//	                         of its partitions' positions, as a cluster
//	                         time; S's tokens are never reused). This is
//	                         how a changed definition (pipeline, options,
//	                         partitions) moves without losing a change:
//	                         rename the stream, start it at the old one's
//	                         checkpoints, restart the members; the ledger
//	                         absorbs the overlap (idempotent,
//	                         transactional). Default now.
//	    group:
//	      partitions: 1      >= 1 (default 1: one active member, the others
//	                         hot standbys). Part of the stream identity.
//	      lease_ttl: 10s     >= 100ms (default 10s). Also the member
//	                         timeout: after a crash, the member's partitions
//	                         move within lease_ttl plus a quarter of it;
//	                         after SIGTERM, at once.
//	      member_id: ""      leave unset (default: lease.DefaultMemberID, the
//	                         Cloud Run service and revision or the host name,
//	                         plus a random suffix per process). If set, it
//	                         must differ for every process: ferry run
//	                         refuses to start (exit 1, naming this key) while
//	                         another live process holds the same id; one
//	                         restarted after a crash under its old id waits
//	                         for the dead registration to expire (at most
//	                         lease_ttl) and starts.
//	      partitioning: hash-range   hash-range | hash-mod: how the
//	                         documents are split among the partitions, by
//	                         the hashed _id ($toHashedIndexKey). hash-range:
//	                         equal contiguous ranges of the hash space, as
//	                         MongoDB's hashed sharding cuts it (a snapshot
//	                         reads each document once). hash-mod: |hash mod
//	                         partitions|, the only one before (a snapshot
//	                         reads every document once per partition).
//	                         Leave unset: a new stream gets hash-range; a
//	                         stream that checkpointed under hash-mod keeps
//	                         it, and its members log so once at start (its
//	                         partitions always agree; checkpoints of both
//	                         fail the stream, identity-changed). hash-range
//	                         is part of the stream identity (partitions >
//	                         1): set on a hash-mod stream, it fails
//	                         identity-changed. To move a hash-mod stream to
//	                         hash-range without losing a change: rename it
//	                         with source.start_at: {checkpoints_of: <old
//	                         name>}, as for any definition change.
//	    delivery:
//	      mode: at-least-once   at-least-once | idempotent | transactional
//	                         (default at-least-once). transactional needs a
//	                         sink writing to the state store's cluster, which
//	                         neither webhook nor stdout is.
//	    retry:
//	      max_attempts: 5    >= 1 (default 5)
//	      initial_backoff: 100ms   > 0 (default 100ms)
//	      max_backoff: 30s   >= initial_backoff (default 30s)
//	      handler_timeout: 30s   > 0, bounds one write to the sink: an
//	                         event, or a batch (default 30s)
//	      max_elapsed: off   off | >= 1s: how long one event is retried at
//	                         most, outage or not (default off). An attempt
//	                         counts towards max_attempts only when the sink
//	                         accepts other events meanwhile (poison); while
//	                         it fails for every event (refused, timeouts,
//	                         408/429/5xx, broker down) nothing counts and
//	                         nothing is dead-lettered, however long the
//	                         outage. A bound trades that for progress: set
//	                         it well above a receiver's cold start or
//	                         redeploy (Cloud Run: seconds to minutes).
//	    on_poison: dead-letter   dead-letter | stall (default dead-letter)
//	    on_history_lost: fail    fail | backfill (default fail)
//	    on_invalidate: stop      stop | restart (default stop)
//	    oversize: fail      fail | dead-letter | drop-images (default fail):
//	                         an event the server cannot return even split
//	                         (servers before 7.0, split_large_events: false):
//	                         the stream fails; or the event is dead-lettered
//	                         (its documentKey, no body); or delivered without
//	                         its fullDocument and fullDocumentBeforeChange
//	    queue:
//	      events: 4000       >= 1 (default 4000)
//	      bytes: 64MiB       >= 1 (default 64MiB)
//	    batch:               what one lane hands the sink in one write: the
//	                         events ready, in order (one document's events
//	                         always share a lane); a failed event is retried
//	                         alone, the others of its batch are done
//	      events: 100        1 to queue.events (default 100, or queue.events
//	                         if smaller); 1 delivers one event per write
//	      bytes: 4MiB        >= 1 (default 4MiB), the events' raw BSON; an
//	                         event above it goes alone
//	      linger: 0s         0 to 10s (default 0: what is ready, no added
//	                         latency): how long a lane with an event waits
//	                         for more before it writes. Every sink takes a
//	                         batch in one write (webhook: one POST per
//	                         event, in order); the ledger of idempotent and
//	                         transactional delivery is read and written once
//	                         per batch
//	    verify:              periodic reconciliation (what ferry verify does)
//	      interval: off      off | >= 1m (default off): each run exports
//	                         ferry_verify_missing and
//	                         ferry_verify_last_run_timestamp
//	      window: 1h         >= 1m: how far back each run reads (from
//	                         the oplog's start, to the increment, when
//	                         the oplog holds less)
//	    snapshot:            how the stream's snapshots read the source: the
//	                         first load (source.start_at: backfill), the
//	                         recovery of on_history_lost: backfill, and
//	                         the operator's requests (ferry snapshot)
//	      chunk_size: 1000   1 to 1000000 (default 1000): documents a
//	                         partition reads at one cluster time; each
//	                         finished chunk is checkpointed, so a crash or
//	                         takeover reads at most one chunk per partition
//	                         again. Memory holds one chunk per partition
//	                         (a chunk also ends at the server's 16 MiB
//	                         reply)
//	      max_rate: 0        documents per second per partition, a whole
//	                         or decimal number (default 0: no cap); the
//	                         source's snapshot load is at most partitions
//	                         times this
//	      poll_interval: 2s  >= 100ms (default 2s): how often each
//	                         partition's owner reads the state store for a
//	                         `ferry snapshot` request or cancellation (one
//	                         point read per partition); a request starts,
//	                         and a cancellation stops it at its next chunk,
//	                         within about this long
//	    sink:                required, exactly one of:
//	      webhook:
//	        url: https://…   required: absolute http(s) URL
//	        secret: ${FERRY_WEBHOOK_SECRET}   required: the Standard
//	                         Webhooks signing secret, "whsec_" followed by
//	                         the base64 of 24 to 64 random bytes (printf
//	                         'whsec_%s' "$(head -c 32 /dev/urandom | base64)")
//	        timeout: 10s     per request, > 0 (default 10s)
//	        encoding: canonical   canonical | relaxed Extended JSON
//	                         (default canonical)
//	        headers:         extra request headers (name: value). The
//	          X-Team: core   sink's own headers (Content-Type, webhook-id,
//	                         webhook-timestamp, webhook-signature,
//	                         Idempotency-Key, Ferry-Epoch, Host,
//	                         Content-Length; any case) cannot be set. A
//	                         User-Agent replaces the default
//	                         "ferry-webhook/1". Values must not contain
//	                         control characters (tab is allowed). Values of
//	                         credential-looking names (Authorization,
//	                         *token*, *key*, …) are redacted.
//	      stdout:            one event per line
//	        encoding: relaxed   canonical | relaxed (default relaxed)
//	      kafka:             one record per event (sink/kafka): key = the
//	                         documentKey as canonical Extended JSON, value =
//	                         the event, headers ferry-event-id (de-duplicate
//	                         replays on it) and ferry-epoch
//	        brokers:         required: seed brokers, a list of host:port
//	          - kafka-1:9092   (port required; one address per item)
//	        topic: ferry.events   required: 1 to 249 of ASCII letters,
//	                         digits, '.', '_', '-'; not "." or ".."
//	        encoding: relaxed   canonical | relaxed (default relaxed); the
//	                         key is canonical always
//	        timeout: 10s     per produce, until every in-sync replica
//	                         acknowledged, >= 1ms (default 10s)
//	        client_id: ferry   the Kafka client.id (default "ferry")
//	        tls: false       TLS 1.2+ to the brokers, verified against the
//	                         system roots (default false)
//	        sasl:            optional authentication:
//	          mechanism: scram-sha-512   required: plain | scram-sha-256 |
//	                         scram-sha-512 (plain sends the password as
//	                         is: use it with tls: true)
//	          user: ferry    required
//	          password: ${FERRY_KAFKA_PASSWORD}   required; redacted in
//	                         Redacted output
//	      pubsub:            one Google Cloud Pub/Sub message per event
//	                         (sink/pubsub): data = the event, ordering key =
//	                         the documentKey, attributes ferry-event-id
//	                         (de-duplicate replays on it), ferry-epoch,
//	                         ferry-operation, ferry-namespace. Credentials:
//	                         Application Default Credentials.
//	        project: my-project   required: the topic's project id
//	        topic: ferry-events   required: a topic id (3 to 255 of letters,
//	                         digits, - _ . ~ + %, starting with a letter,
//	                         not "goog…") or projects/<project>/topics/<id>
//	        endpoint: us-east1-pubsub.googleapis.com:443   optional regional
//	                         endpoint (publish to one region for ordering)
//	        emulator: localhost:8085   optional: an emulator, without TLS
//	                         or credentials (not with endpoint)
//	        encoding: relaxed   canonical | relaxed (default relaxed)
//	        timeout: 10s     per publish, until Pub/Sub's ack, >= 1ms
//	                         (default 10s)
//
// A nats sink, nats: {url, subject, encoding, timeout}, publishes to NATS
// JetStream (sink/natsjs) with the event id as Nats-Msg-Id. url (required)
// is a nats:// or tls:// server URL without path or query, or a
// comma-separated list of them; credentials in it (user:password@ or
// token@, percent-encoded) are redacted. subject (default
// ferry.{db}.{coll}.{op}) is checked as sink/natsjs checks it: '.'-separated
// literal tokens and the placeholders {db}, {coll} and {op}, no wildcards
// ('*', '>'), whitespace or empty tokens. encoding is canonical or relaxed
// (default relaxed); timeout bounds one publish (default 10s).
//
// A mongodb sink, mongodb: {database, collection}, keeps a projection of the
// source in the state store's cluster (sink/mongoproj); it needs
// source.full_document updateLookup, or required (with pre- and post-images
// enabled on the collection): not whenAvailable, under which an update
// without a recorded post-image would be lost. It is the one sink that
// allows delivery.mode transactional (source and state on the same
// cluster). Its optional tombstone_retention (a duration of at least 1m,
// default 24h, or off) is how long `ferry run` keeps the tombstone of a
// deleted document at least: it purges a tombstone once it is older than
// that and every partition's checkpoint is past the delete, checking
// every quarter of the retention (at most every 10m). off keeps
// tombstones forever.
//
// See examples/webhook.yaml, examples/stdout.yaml, examples/mongodb.yaml,
// examples/nats.yaml, examples/kafka.yaml and examples/pubsub.yaml in the
// repository.
//
// # Connection pools
//
// `ferry run` opens one MongoDB client for the state store and one per
// source URI, never one for both, even when state.uri is the source's
// URI: each partition's change stream holds one of its client's pooled
// connections while it waits for events (a getMore, up to a second), so
// lease renewals, heartbeats and checkpoints on a shared pool would wait
// behind the streams and, past the pool's size, time out and lose their
// leases. Without maxPoolSize in a URI, ferry sizes each pool
// (SourcePoolNeed, StatePoolNeed, PoolSize): the source client a
// connection per partition of the streams reading it plus PoolHeadroom
// (10), the state client a connection per partition (every lease renewed
// at once) and per stream (its ownership watch) plus PoolHeadroom; never
// below the driver's default of 100. A maxPoolSize in a URI is kept, and
// Parse reports it as a problem of that URI when it is below that need
// (maxPoolSize=0, no limit, is always enough). Connections are opened as
// they are needed, up to the pool's size.
//
// # Using a configuration
//
// For each stream, ConsumerOptions returns the ferry options (scope,
// pipeline, change-stream options, start position, retry, handler timeout,
// policies, queue limits, snapshot pacing, stream name), GroupOptions the group options
// (name, partitions, lease TTL, member id, delivery mode) and NewSink the
// sink, unconnected (the sink section mapped onto the sink package's
// options; Kafka SASL through KafkaSASL.SASL):
//
//	cfg, err := config.Load("ferry.yaml")
//	s := &cfg.Streams[0]
//	state := stateClient.Database(cfg.State.Database)
//	snk, err := s.NewSink(os.Stdout, state)
//	copts, err := s.GroupConsumerOptions(nil)
//	g, err := group.NewBatch(client, sink.BatchHandler(snk), append(s.GroupOptions(),
//		group.StateDatabase(state), group.ConsumerOptions(copts...))...)
//
// The checks that a sink makes of its own options are the sink package's,
// called from here (webhook.CheckURL, webhook.CheckHeader,
// webhook.DecodeSecret, kafka.CheckTopic, kafka.CheckBroker,
// pubsub.CheckProject, pubsub.CheckTopic; natssubject's rules for the NATS
// subject): one rule each, so `ferry validate` refuses what `ferry run`
// would. StateURI gives the state store's connection string (state.uri or
// the source's).
//
// # Why a hand-written decoder
//
// The file is parsed with gopkg.in/yaml.v3 into a yaml.Node tree and then
// walked by this package rather than decoded with Decoder.KnownFields:
// yaml.v3 reports line numbers and stops its type errors at Go types,
// while operators need the path of every problem at once, environment
// expansion must happen on values after parsing, and pipeline mappings must
// keep their key order.
package config
