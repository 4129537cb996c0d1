// Package metrics exports a Ferry consumer's activity as Prometheus metrics.
// It implements the consumer's hook interfaces (ferry.HookEvent,
// HookResume, HookCheckpoint, HookQueue, HookState, HookSnapshot), so the core never imports
// Prometheus: pass the Metrics value to ferry.WithHooks.
//
//	m := metrics.New(prometheus.DefaultRegisterer)
//	c, _ := ferry.NewConsumer(client, h, ..., ferry.WithHooks(m))
//
// Metric names follow Prometheus conventions under ferry_ (DESIGN.md,
// "Observability"). Labels never carry documents, tokens, event ids or
// credentials.
//
// Lag (ferry_lag_seconds) has one definition, the same as ferry.Status.Lag
// and `ferry status`: 0 when nothing is pending, otherwise now minus the
// clusterTime of the oldest event read and not yet applied or
// dead-lettered. It is computed at scrape time, so it grows while a
// partition is stuck.
//
// Read delay (ferry_read_delay_seconds) is how long the first event of a
// partition's newest server batch waited between its write on the source
// and its arrival (ferry.QueueInfo.ReadDelay). On a replica set it is
// milliseconds; through a mongos an event waits until every shard has
// reported progress past it, which an idle shard does only every
// periodicNoopIntervalSecs (10 s by default): the latency an idle shard
// adds, which lag (measured from arrival) does not show.
//
// Head-room (ferry_oplog_headroom_seconds) is a partition's checkpointed
// position minus the start of the source's oplog window, which the owner
// of the Metrics reports with OplogStart (the daemon probes it every
// minute): the early warning before the oplog drops a position and the
// stream fails with lost history (ChangeStreamHistoryLost). When a partition stops on this member (handed off,
// lost, failed) every series labelled with it is removed, so a member
// never exports a partition it no longer runs.
//
// Snapshots (HookSnapshot): ferry_snapshot_documents_total and
// ferry_snapshot_chunks_total count what this member delivered, from the
// progress reports' differences: a report repeated counts nothing, and the
// first report of a snapshot on this member (a new one, from 0, or one
// taken over from another member, part done) only sets the baseline, so
// another member's documents are never counted here. The gauges
// (ferry_snapshot_documents_done, _estimated, _per_second, ferry_snapshot_running,
// ferry_snapshot_chunk_failures)
// are the snapshot's own figures, whoever delivered its chunks.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferry-io/ferry"
)

// Metrics collects a consumer's (or a group's) metrics.
type Metrics struct {
	events      *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	retries     *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	resumes     *prometheus.CounterVec
	lag         *prometheus.Desc
	sinkUp      *prometheus.GaugeVec
	state       *prometheus.GaugeVec
	failures    *prometheus.CounterVec
	queueEvents *prometheus.GaugeVec
	queueBytes  *prometheus.GaugeVec
	readDelay   *prometheus.GaugeVec
	cpWrites    *prometheus.CounterVec
	cpAge       *prometheus.Desc
	noImage     *prometheus.CounterVec
	headroom    *prometheus.Desc
	window      *prometheus.Desc
	snapDocs    *prometheus.CounterVec
	snapChunks  *prometheus.CounterVec
	snapDone    *prometheus.GaugeVec
	snapTotal   *prometheus.GaugeVec
	snapRate    *prometheus.GaugeVec
	snapRunning *prometheus.GaugeVec
	snapFails   *prometheus.GaugeVec

	mu          sync.Mutex
	checkpoints map[[2]string]time.Time  // (stream, partition) → last successful checkpoint write
	pending     map[[2]string]time.Time  // (stream, partition) → clusterTime of the oldest pending event (zero: none)
	positions   map[[2]string]time.Time  // (stream, partition) → cluster time of the checkpointed position
	oplogStart  map[string]time.Time     // stream → the start of its source's oplog window
	skew        map[string]time.Duration // stream → its source's clock minus ours, when the start was found
	snaps       map[[2]string]snapSeen   // (stream, partition) → the last snapshot report seen here
	now         func() time.Time
}

// snapSeen is the last progress report of a partition's snapshot seen by
// this member: the counters add what the next report adds to it.
type snapSeen struct {
	id           string
	done, chunks int64
}

var (
	_ ferry.HookEvent      = (*Metrics)(nil)
	_ ferry.HookResume     = (*Metrics)(nil)
	_ ferry.HookCheckpoint = (*Metrics)(nil)
	_ ferry.HookQueue      = (*Metrics)(nil)
	_ ferry.HookState      = (*Metrics)(nil)
	_ ferry.HookSnapshot   = (*Metrics)(nil)
)

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	sp := []string{"stream", "partition"}
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_events_total",
			Help: "Events handled, by stream, partition, operation and result (applied, retried, dead-lettered, stalled)."},
			[]string{"stream", "partition", "operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ferry_handler_duration_seconds",
			Help: "Duration of handler calls.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"stream"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_retries_total",
			Help: "Handler calls that failed and were retried."}, sp),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_dead_letters_total",
			Help: "Events written to the dead-letter store."}, sp),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_resumes_total",
			Help: "Change-stream reopenings after an error, by error class."}, []string{"stream", "partition", "class"}),
		lag: prometheus.NewDesc("ferry_lag_seconds",
			"Lag: 0 when nothing is pending, else now minus the clusterTime of the oldest event not yet applied or dead-lettered.", sp, nil),
		sinkUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_sink_up",
			Help: "1 while the partition's sink accepts events, 0 while every delivery attempt since the last success failed (waiting-for-sink: nothing is dead-lettered)."}, sp),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_stream_state",
			Help: "1 for the stream's current state on this member (starting, running, waiting-for-sink, failed, draining, stopped), 0 for the others."},
			[]string{"stream", "state"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_stream_failures_total",
			Help: "Times the stream entered the failed state on this member, by failure class."}, []string{"stream", "class"}),
		queueEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_queue_events",
			Help: "Events read but not finished."}, sp),
		queueBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_queue_bytes",
			Help: "Bytes of events read but not finished."}, sp),
		readDelay: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_read_delay_seconds",
			Help: "How long the first event of the partition's newest server batch waited between its write on the source (wallTime) and its arrival: through a mongos, up to the shards' periodicNoopIntervalSecs when a shard is idle."}, sp),
		cpWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_checkpoint_writes_total",
			Help: "Checkpoint writes, by result (ok, error)."}, []string{"stream", "partition", "result"}),
		cpAge: prometheus.NewDesc("ferry_checkpoint_age_seconds",
			"Seconds since the partition's last successful checkpoint write.", sp, nil),
		noImage: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_events_without_image_total",
			Help: "Changes that arrived without the image the stream asks for when available (full_document or full_document_before_change whenAvailable), by image (pre, post)."},
			[]string{"stream", "partition", "image"}),
		headroom: prometheus.NewDesc("ferry_oplog_headroom_seconds",
			"The partition's checkpointed position minus the start of the source's oplog window: how long until the oplog no longer holds it (negative: history already lost).", sp, nil),
		window: prometheus.NewDesc("ferry_oplog_window_seconds",
			"How much history the source's oplog holds: now minus the cluster time of its oldest entry.", []string{"stream"}, nil),
		snapDocs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_snapshot_documents_total",
			Help: "Documents delivered by snapshots on this member (counted when their chunk finished)."}, sp),
		snapChunks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_snapshot_chunks_total",
			Help: "Snapshot chunks finished on this member."}, sp),
		snapDone: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_snapshot_documents_done",
			Help: "Documents the partition's current (or last) snapshot delivered so far, by every member that ran it."}, sp),
		snapTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_snapshot_documents_estimated",
			Help: "The estimated documents of the partition's current (or last) snapshot (0: unknown)."}, sp),
		snapRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_snapshot_documents_per_second",
			Help: "The snapshot's rate since this member took it up; once it finished, the rate of its last chunk."}, sp),
		snapRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_snapshot_running",
			Help: "1 while a snapshot of the partition runs on this member, else 0."}, sp),
		snapFails: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_snapshot_chunk_failures",
			Help: "Failed tries of the chunk the partition's snapshot is at (0 once a chunk finished): above 0, a chunk is being retried."}, sp),
		checkpoints: map[[2]string]time.Time{},
		pending:     map[[2]string]time.Time{},
		positions:   map[[2]string]time.Time{},
		oplogStart:  map[string]time.Time{},
		skew:        map[string]time.Duration{},
		snaps:       map[[2]string]snapSeen{},
		now:         time.Now,
	}
	reg.MustRegister(m.events, m.duration, m.retries, m.deadLetters, m.resumes, m.sinkUp, m.state, m.failures,
		m.queueEvents, m.queueBytes, m.readDelay, m.cpWrites, m.noImage,
		m.snapDocs, m.snapChunks, m.snapDone, m.snapTotal, m.snapRate, m.snapRunning, m.snapFails, m)
	return m
}

func part(p int) string { return strconv.Itoa(p) }

// OnEvent implements ferry.HookEvent.
func (m *Metrics) OnEvent(i ferry.EventInfo) {
	p := part(i.Partition)
	m.events.WithLabelValues(i.Stream, p, i.Operation, string(i.Result)).Inc()
	switch i.Result {
	case ferry.ResultApplied:
		m.duration.WithLabelValues(i.Stream).Observe(i.Duration.Seconds())
	case ferry.ResultRetried:
		m.retries.WithLabelValues(i.Stream, p).Inc()
	case ferry.ResultDeadLettered:
		m.deadLetters.WithLabelValues(i.Stream, p).Inc()
	}
	if i.NoPreImage {
		m.noImage.WithLabelValues(i.Stream, p, "pre").Inc()
	}
	if i.NoPostImage {
		m.noImage.WithLabelValues(i.Stream, p, "post").Inc()
	}
}

// OnResume implements ferry.HookResume.
func (m *Metrics) OnResume(i ferry.ResumeInfo) {
	m.resumes.WithLabelValues(i.Stream, part(i.Partition), i.Class).Inc()
}

// OnCheckpoint implements ferry.HookCheckpoint.
func (m *Metrics) OnCheckpoint(i ferry.CheckpointInfo) {
	p := part(i.Partition)
	if i.Err != nil {
		m.cpWrites.WithLabelValues(i.Stream, p, "error").Inc()
		return
	}
	m.cpWrites.WithLabelValues(i.Stream, p, "ok").Inc()
	m.mu.Lock()
	m.checkpoints[[2]string{i.Stream, p}] = m.now()
	if !i.ClusterTime.IsZero() && i.ClusterTime.Unix() > 0 {
		m.positions[[2]string{i.Stream, p}] = i.ClusterTime
	}
	m.mu.Unlock()
}

// OplogStart records the start of a stream's source oplog window (the
// cluster time of its oldest entry, ferry.Consumer.OplogStart) and the
// source's clock when it was found (zero: assume ours), from which
// ferry_oplog_window_seconds (by the source's clock) and each partition's
// ferry_oplog_headroom_seconds are computed at scrape time.
func (m *Metrics) OplogStart(stream string, start, sourceNow time.Time) {
	m.mu.Lock()
	m.oplogStart[stream] = start
	m.skew[stream] = 0
	if !sourceNow.IsZero() {
		m.skew[stream] = sourceNow.Sub(m.now())
	}
	m.mu.Unlock()
}

// OnQueue implements ferry.HookQueue.
func (m *Metrics) OnQueue(i ferry.QueueInfo) {
	p := part(i.Partition)
	m.queueEvents.WithLabelValues(i.Stream, p).Set(float64(i.Events))
	m.queueBytes.WithLabelValues(i.Stream, p).Set(float64(i.Bytes))
	m.readDelay.WithLabelValues(i.Stream, p).Set(i.ReadDelay.Seconds())
	m.mu.Lock()
	m.pending[[2]string{i.Stream, p}] = i.OldestPending
	m.mu.Unlock()
}

// OnState implements ferry.HookState: the sink's state, and the removal of
// a partition's series when it stops on this member.
func (m *Metrics) OnState(i ferry.StateInfo) {
	p := part(i.Partition)
	switch i.State {
	case ferry.StateRunning:
		m.sinkUp.WithLabelValues(i.Stream, p).Set(1)
	case ferry.StateWaitingForSink:
		m.sinkUp.WithLabelValues(i.Stream, p).Set(0)
	case ferry.StateStopped:
		m.forget(i.Stream, p)
	}
}

// forget removes every series of one partition.
func (m *Metrics) forget(stream, p string) {
	labels := prometheus.Labels{"stream": stream, "partition": p}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.events, m.retries, m.deadLetters, m.resumes, m.sinkUp, m.queueEvents, m.queueBytes, m.readDelay, m.cpWrites, m.noImage,
		m.snapDocs, m.snapChunks, m.snapDone, m.snapTotal, m.snapRate, m.snapRunning, m.snapFails,
	} {
		v.DeletePartialMatch(labels)
	}
	m.mu.Lock()
	delete(m.checkpoints, [2]string{stream, p})
	delete(m.pending, [2]string{stream, p})
	delete(m.positions, [2]string{stream, p})
	delete(m.snaps, [2]string{stream, p})
	m.mu.Unlock()
}

// OnSnapshot implements ferry.HookSnapshot: the counters add the
// documents and chunks this report adds to the last one of the same
// snapshot seen here; the first report of a snapshot on this member only
// sets the baseline (a snapshot taken over part done: its documents so far
// are another member's).
func (m *Metrics) OnSnapshot(i ferry.SnapshotInfo) {
	p, pr := part(i.Partition), i.Progress
	k := [2]string{i.Stream, p}
	docs, chunks := m.snapDocs.WithLabelValues(i.Stream, p), m.snapChunks.WithLabelValues(i.Stream, p)
	m.mu.Lock()
	prev, ok := m.snaps[k]
	m.snaps[k] = snapSeen{id: pr.ID, done: pr.Done, chunks: pr.Chunks}
	if ok && prev.id == pr.ID {
		// A report repeated adds nothing; one that goes back (a chunk
		// whose record was not written, read again) is the new baseline.
		if d := pr.Done - prev.done; d > 0 {
			docs.Add(float64(d))
		}
		if d := pr.Chunks - prev.chunks; d > 0 {
			chunks.Add(float64(d))
		}
	}
	m.mu.Unlock()
	m.snapDone.WithLabelValues(i.Stream, p).Set(float64(pr.Done))
	m.snapTotal.WithLabelValues(i.Stream, p).Set(float64(pr.Total))
	m.snapRate.WithLabelValues(i.Stream, p).Set(pr.Rate)
	running := 0.0
	if pr.Running() {
		running = 1
	}
	m.snapRunning.WithLabelValues(i.Stream, p).Set(running)
	m.snapFails.WithLabelValues(i.Stream, p).Set(float64(pr.Failures))
}

// StreamState sets ferry_stream_state for a stream: 1 for state, 0 for
// the other states (the names of group.States).
func (m *Metrics) StreamState(stream, state string) {
	for _, s := range []string{"starting", "running", "waiting-for-sink", "failed", "draining", "stopped"} {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(stream, s).Set(v)
	}
}

// StreamFailure counts a stream's entry into the failed state.
func (m *Metrics) StreamFailure(stream, class string) {
	m.failures.WithLabelValues(stream, class).Inc()
}

// Describe implements prometheus.Collector (checkpoint age, lag, oplog
// window and head-room).
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.cpAge
	ch <- m.lag
	ch <- m.headroom
	ch <- m.window
}

// Collect implements prometheus.Collector: checkpoint ages and lags are
// computed at scrape time.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, at := range m.checkpoints {
		ch <- prometheus.MustNewConstMetric(m.cpAge, prometheus.GaugeValue, max(now.Sub(at).Seconds(), 0), k[0], k[1])
	}
	for k, oldest := range m.pending {
		ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, ferry.LagOf(now, oldest).Seconds(), k[0], k[1])
	}
	for stream, start := range m.oplogStart {
		ch <- prometheus.MustNewConstMetric(m.window, prometheus.GaugeValue, max(now.Add(m.skew[stream]).Sub(start).Seconds(), 0), stream)
	}
	for k, at := range m.positions {
		if start, ok := m.oplogStart[k[0]]; ok {
			ch <- prometheus.MustNewConstMetric(m.headroom, prometheus.GaugeValue, at.Sub(start).Seconds(), k[0], k[1])
		}
	}
}
