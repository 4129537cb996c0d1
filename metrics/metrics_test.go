package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ferry-io/ferry"
)

func TestMetricsFromHooks(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	now := time.Unix(1_000_000, 0)
	m.now = func() time.Time { return now }
	m.OnEvent(ferry.EventInfo{Stream: "s", Partition: 1, Operation: "insert", Result: ferry.ResultApplied,
		Duration: 2 * time.Millisecond, ClusterTime: now.Add(-3 * time.Second)})
	m.OnEvent(ferry.EventInfo{Stream: "s", Partition: 1, Operation: "update", Result: ferry.ResultRetried, Err: errors.New("x")})
	m.OnEvent(ferry.EventInfo{Stream: "s", Partition: 1, Operation: "update", Result: ferry.ResultDeadLettered})
	m.OnResume(ferry.ResumeInfo{Stream: "s", Partition: 1, Class: "resumable"})
	m.OnCheckpoint(ferry.CheckpointInfo{Stream: "s", Partition: 1, Version: 3})
	m.OnCheckpoint(ferry.CheckpointInfo{Stream: "s", Partition: 1, Err: errors.New("down")})
	m.OnQueue(ferry.QueueInfo{Stream: "s", Partition: 1, Events: 7, Bytes: 700})
	now = now.Add(5 * time.Second)

	want := `
# HELP ferry_checkpoint_age_seconds Seconds since the partition's last successful checkpoint write.
# TYPE ferry_checkpoint_age_seconds gauge
ferry_checkpoint_age_seconds{partition="1",stream="s"} 5
# HELP ferry_dead_letters_total Events written to the dead-letter store.
# TYPE ferry_dead_letters_total counter
ferry_dead_letters_total{partition="1",stream="s"} 1
# HELP ferry_lag_seconds End-to-end lag: now minus the clusterTime of the last applied event.
# TYPE ferry_lag_seconds gauge
ferry_lag_seconds{partition="1",stream="s"} 3
# HELP ferry_queue_events Events read but not finished.
# TYPE ferry_queue_events gauge
ferry_queue_events{partition="1",stream="s"} 7
# HELP ferry_resumes_total Change-stream reopenings after an error, by error class.
# TYPE ferry_resumes_total counter
ferry_resumes_total{class="resumable",partition="1",stream="s"} 1
# HELP ferry_retries_total Handler calls that failed and were retried.
# TYPE ferry_retries_total counter
ferry_retries_total{partition="1",stream="s"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"ferry_checkpoint_age_seconds", "ferry_dead_letters_total", "ferry_lag_seconds", "ferry_queue_events",
		"ferry_resumes_total", "ferry_retries_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(m.events.WithLabelValues("s", "1", "insert", "applied")); n != 1 {
		t.Fatalf("applied inserts = %v", n)
	}
	if n := testutil.ToFloat64(m.cpWrites.WithLabelValues("s", "1", "error")); n != 1 {
		t.Fatalf("failed checkpoint writes = %v", n)
	}
}
