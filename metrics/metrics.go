// Package metrics exports a Ferry consumer's activity as Prometheus metrics.
// It implements the consumer's hook interfaces (ferry.HookEvent,
// HookResume, HookCheckpoint, HookQueue), so the core never imports
// Prometheus: pass the Metrics value to ferry.WithHooks.
//
//	m := metrics.New(prometheus.DefaultRegisterer)
//	c, _ := ferry.NewConsumer(client, h, ..., ferry.WithHooks(m))
//
// Metric names follow Prometheus conventions under ferry_ (DESIGN.md,
// "Observability"). Labels never carry documents, tokens or credentials.
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
	lag         *prometheus.GaugeVec
	queueEvents *prometheus.GaugeVec
	queueBytes  *prometheus.GaugeVec
	cpWrites    *prometheus.CounterVec
	cpAge       *prometheus.Desc

	mu          sync.Mutex
	checkpoints map[[2]string]time.Time // (stream, partition) → last successful checkpoint write
	now         func() time.Time
}

var (
	_ ferry.HookEvent      = (*Metrics)(nil)
	_ ferry.HookResume     = (*Metrics)(nil)
	_ ferry.HookCheckpoint = (*Metrics)(nil)
	_ ferry.HookQueue      = (*Metrics)(nil)
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
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_lag_seconds",
			Help: "End-to-end lag: now minus the clusterTime of the last applied event."}, sp),
		queueEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_queue_events",
			Help: "Events read but not finished."}, sp),
		queueBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ferry_queue_bytes",
			Help: "Bytes of events read but not finished."}, sp),
		cpWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ferry_checkpoint_writes_total",
			Help: "Checkpoint writes, by result (ok, error)."}, []string{"stream", "partition", "result"}),
		cpAge: prometheus.NewDesc("ferry_checkpoint_age_seconds",
			"Seconds since the partition's last successful checkpoint write.", sp, nil),
		checkpoints: map[[2]string]time.Time{},
		now:         time.Now,
	}
	reg.MustRegister(m.events, m.duration, m.retries, m.deadLetters, m.resumes, m.lag, m.queueEvents, m.queueBytes, m.cpWrites, m)
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
		if !i.ClusterTime.IsZero() && i.ClusterTime.Unix() > 0 {
			m.lag.WithLabelValues(i.Stream, p).Set(m.now().Sub(i.ClusterTime).Seconds())
		}
	case ferry.ResultRetried:
		m.retries.WithLabelValues(i.Stream, p).Inc()
	case ferry.ResultDeadLettered:
		m.deadLetters.WithLabelValues(i.Stream, p).Inc()
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
	m.mu.Unlock()
}

// OnQueue implements ferry.HookQueue.
func (m *Metrics) OnQueue(i ferry.QueueInfo) {
	p := part(i.Partition)
	m.queueEvents.WithLabelValues(i.Stream, p).Set(float64(i.Events))
	m.queueBytes.WithLabelValues(i.Stream, p).Set(float64(i.Bytes))
}

// Describe implements prometheus.Collector (for the checkpoint age).
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.cpAge }

// Collect implements prometheus.Collector: checkpoint ages are computed
// at scrape time.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, at := range m.checkpoints {
		ch <- prometheus.MustNewConstMetric(m.cpAge, prometheus.GaugeValue, now.Sub(at).Seconds(), k[0], k[1])
	}
}
