package metrics

import (
	"errors"
	"fmt"
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
	m.OnQueue(ferry.QueueInfo{Stream: "s", Partition: 1, Events: 7, Bytes: 700, OldestPending: now.Add(-3 * time.Second), ReadDelay: 9500 * time.Millisecond})
	m.OnQueue(ferry.QueueInfo{Stream: "s", Partition: 2, Events: 0, Bytes: 0}) // nothing pending: lag 0
	now = now.Add(5 * time.Second)

	want := `
# HELP ferry_checkpoint_age_seconds Seconds since the partition's last successful checkpoint write.
# TYPE ferry_checkpoint_age_seconds gauge
ferry_checkpoint_age_seconds{partition="1",stream="s"} 5
# HELP ferry_dead_letters_total Events written to the dead-letter store.
# TYPE ferry_dead_letters_total counter
ferry_dead_letters_total{partition="1",stream="s"} 1
# HELP ferry_lag_seconds Lag: 0 when nothing is pending, else now minus the clusterTime of the oldest event not yet applied or dead-lettered.
# TYPE ferry_lag_seconds gauge
ferry_lag_seconds{partition="1",stream="s"} 8
ferry_lag_seconds{partition="2",stream="s"} 0
# HELP ferry_queue_events Events read but not finished.
# TYPE ferry_queue_events gauge
ferry_queue_events{partition="1",stream="s"} 7
ferry_queue_events{partition="2",stream="s"} 0
# HELP ferry_read_delay_seconds How long the first event of the partition's newest server batch waited between its write on the source (wallTime) and its arrival: through a mongos, up to the shards' periodicNoopIntervalSecs when a shard is idle.
# TYPE ferry_read_delay_seconds gauge
ferry_read_delay_seconds{partition="1",stream="s"} 9.5
ferry_read_delay_seconds{partition="2",stream="s"} 0
# HELP ferry_resumes_total Change-stream reopenings after an error, by error class.
# TYPE ferry_resumes_total counter
ferry_resumes_total{class="resumable",partition="1",stream="s"} 1
# HELP ferry_retries_total Handler calls that failed and were retried.
# TYPE ferry_retries_total counter
ferry_retries_total{partition="1",stream="s"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"ferry_checkpoint_age_seconds", "ferry_dead_letters_total", "ferry_lag_seconds", "ferry_queue_events",
		"ferry_read_delay_seconds", "ferry_resumes_total", "ferry_retries_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(m.events.WithLabelValues("s", "1", "insert", "applied")); n != 1 {
		t.Fatalf("applied inserts = %v", n)
	}
	if n := testutil.ToFloat64(m.cpWrites.WithLabelValues("s", "1", "error")); n != 1 {
		t.Fatalf("failed checkpoint writes = %v", n)
	}
}

// TestPartitionSeriesGoWithThePartition: when a partition stops on this
// member, none of its series remain (a member owning partitions 1–2 used to
// export partition 0's growing checkpoint age); the sink gauge follows the
// run state.
func TestPartitionSeriesGoWithThePartition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	for _, p := range []int{0, 1} {
		m.OnState(ferry.StateInfo{Stream: "s", Partition: p, State: ferry.StateRunning})
		m.OnEvent(ferry.EventInfo{Stream: "s", Partition: p, Operation: "insert", Result: ferry.ResultApplied})
		m.OnCheckpoint(ferry.CheckpointInfo{Stream: "s", Partition: p, Version: 1})
		m.OnQueue(ferry.QueueInfo{Stream: "s", Partition: p, Events: 1})
	}
	m.OnState(ferry.StateInfo{Stream: "s", Partition: 1, State: ferry.StateWaitingForSink})
	if up := testutil.ToFloat64(m.sinkUp.WithLabelValues("s", "1")); up != 0 {
		t.Fatalf("ferry_sink_up of a partition waiting for its sink = %v", up)
	}
	m.OnState(ferry.StateInfo{Stream: "s", Partition: 0, State: ferry.StateStopped})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			for _, l := range mm.GetLabel() {
				if l.GetName() == "partition" {
					seen++
					if l.GetValue() == "0" {
						t.Errorf("%s still has a series for partition 0 after it stopped", mf.GetName())
					}
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no partition series at all: partition 1's should remain")
	}
	m.StreamState("s", "failed")
	if v := testutil.ToFloat64(m.state.WithLabelValues("s", "failed")); v != 1 {
		t.Fatalf("ferry_stream_state{state=failed} = %v", v)
	}
	if v := testutil.ToFloat64(m.state.WithLabelValues("s", "running")); v != 0 {
		t.Fatalf("ferry_stream_state{state=running} = %v", v)
	}
}

// TestOplogHeadroomAndMissingImages: head-room is the checkpointed
// position minus the oplog window's start (negative once lost), the window
// is now by the source's clock minus its start, both computed at scrape
// time; an event without
// an image it could have had counts once per image; a stopped partition's
// head-room series goes.
func TestOplogHeadroomAndMissingImages(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	now := time.Unix(2_000_000, 0)
	m.now = func() time.Time { return now }
	m.OnCheckpoint(ferry.CheckpointInfo{Stream: "s", Partition: 0, Version: 1, ClusterTime: now.Add(-30 * time.Second)})
	m.OnCheckpoint(ferry.CheckpointInfo{Stream: "s", Partition: 1, Version: 1, ClusterTime: now.Add(-2 * time.Hour)})
	m.OnCheckpoint(ferry.CheckpointInfo{Stream: "other", Partition: 0, Version: 1, ClusterTime: now}) // no window known: no head-room
	m.OplogStart("s", now.Add(-time.Hour), now.Add(-5*time.Second))                                   // the source's clock 5 s behind ours
	m.OnEvent(ferry.EventInfo{Stream: "s", Partition: 0, Operation: "update", Result: ferry.ResultApplied, NoPreImage: true, NoPostImage: true})
	m.OnEvent(ferry.EventInfo{Stream: "s", Partition: 0, Operation: "delete", Result: ferry.ResultDeadLettered, NoPreImage: true})
	m.OnEvent(ferry.EventInfo{Stream: "s", Partition: 0, Operation: "update", Result: ferry.ResultApplied})
	now = now.Add(10 * time.Second)
	want := `
# HELP ferry_events_without_image_total Changes that arrived without the image the stream asks for when available (full_document or full_document_before_change whenAvailable), by image (pre, post).
# TYPE ferry_events_without_image_total counter
ferry_events_without_image_total{image="post",partition="0",stream="s"} 1
ferry_events_without_image_total{image="pre",partition="0",stream="s"} 2
# HELP ferry_oplog_headroom_seconds The partition's checkpointed position minus the start of the source's oplog window: how long until the oplog no longer holds it (negative: history already lost).
# TYPE ferry_oplog_headroom_seconds gauge
ferry_oplog_headroom_seconds{partition="0",stream="s"} 3570
ferry_oplog_headroom_seconds{partition="1",stream="s"} -3600
# HELP ferry_oplog_window_seconds How much history the source's oplog holds: now minus the cluster time of its oldest entry.
# TYPE ferry_oplog_window_seconds gauge
ferry_oplog_window_seconds{stream="s"} 3605
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"ferry_events_without_image_total", "ferry_oplog_headroom_seconds", "ferry_oplog_window_seconds"); err != nil {
		t.Fatal(err)
	}
	m.OnState(ferry.StateInfo{Stream: "s", Partition: 1, State: ferry.StateStopped})
	if n, err := testutil.GatherAndCount(reg, "ferry_oplog_headroom_seconds"); err != nil || n != 1 {
		t.Fatalf("head-room series after partition 1 stopped: %d, %v; want 1", n, err)
	}
}

// TestSnapshotMetrics: the snapshot counters count what this member
// delivered, from the reports' differences: a repeated report adds
// nothing, a new snapshot starts from its own 0, and a snapshot taken over
// part done counts only the documents delivered here after the takeover.
// The gauges follow the snapshot; its series go with the partition.
func TestSnapshotMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	started := time.Unix(1_000_000, 0)
	snap := func(p int, id string, done, chunks, total int64, rate float64, finished bool) {
		pr := ferry.SnapshotProgress{ID: id, Reason: ferry.SnapshotForStart, Done: done, Chunks: chunks, Total: total, Rate: rate, Started: started}
		if finished {
			pr.Finished = started.Add(time.Minute)
		}
		m.OnSnapshot(ferry.SnapshotInfo{Stream: "s", Partition: p, Progress: pr})
	}
	compare := func(step, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ferry_snapshot_documents_total", "ferry_snapshot_chunks_total",
			"ferry_snapshot_documents_done", "ferry_snapshot_documents_estimated", "ferry_snapshot_documents_per_second",
			"ferry_snapshot_running"); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	const head = `
# HELP ferry_snapshot_chunks_total Snapshot chunks finished on this member.
# TYPE ferry_snapshot_chunks_total counter
# HELP ferry_snapshot_documents_done Documents the partition's current (or last) snapshot delivered so far, by every member that ran it.
# TYPE ferry_snapshot_documents_done gauge
# HELP ferry_snapshot_documents_estimated The estimated documents of the partition's current (or last) snapshot (0: unknown).
# TYPE ferry_snapshot_documents_estimated gauge
# HELP ferry_snapshot_documents_per_second The snapshot's rate since this member took it up; once it finished, the rate of its last chunk.
# TYPE ferry_snapshot_documents_per_second gauge
# HELP ferry_snapshot_documents_total Documents delivered by snapshots on this member (counted when their chunk finished).
# TYPE ferry_snapshot_documents_total counter
# HELP ferry_snapshot_running 1 while a snapshot of the partition runs on this member, else 0.
# TYPE ferry_snapshot_running gauge
`
	series := func(p string, docs, chunks, done, total, rate, running float64) string {
		return fmt.Sprintf(`ferry_snapshot_chunks_total{partition=%[1]q,stream="s"} %[3]v
ferry_snapshot_documents_done{partition=%[1]q,stream="s"} %[4]v
ferry_snapshot_documents_estimated{partition=%[1]q,stream="s"} %[5]v
ferry_snapshot_documents_per_second{partition=%[1]q,stream="s"} %[6]v
ferry_snapshot_documents_total{partition=%[1]q,stream="s"} %[2]v
ferry_snapshot_running{partition=%[1]q,stream="s"} %[7]v
`, p, docs, chunks, done, total, rate, running)
	}

	// A new snapshot on partition 0, its chunks, reports repeated.
	snap(0, "a", 0, 0, 2500, 0, false)
	snap(0, "a", 0, 0, 2500, 0, false)
	compare("started", head+series("0", 0, 0, 0, 2500, 0, 1))
	snap(0, "a", 1000, 1, 2500, 500, false)
	snap(0, "a", 1000, 1, 2500, 500, false)
	compare("one chunk, reported twice", head+series("0", 1000, 1, 1000, 2500, 500, 1))
	snap(0, "a", 2500, 3, 2500, 625, false)
	snap(0, "a", 2500, 3, 2500, 625, true)
	snap(0, "a", 2500, 3, 2500, 625, true)
	snap(0, "a", 2500, 3, 2500, 625, true)
	compare("finished, reported again at every poll", head+series("0", 2500, 3, 2500, 2500, 625, 0))

	// The next snapshot of the partition starts from its own 0.
	snap(0, "b", 0, 0, 2600, 0, false)
	compare("a second snapshot", head+series("0", 2500, 3, 0, 2600, 0, 1))
	snap(0, "b", 700, 1, 2600, 350, false)
	compare("a second snapshot's chunk", head+series("0", 3200, 4, 700, 2600, 350, 1))

	// Partition 1 taken over from another member with 5000 documents
	// done: those are not this member's.
	snap(1, "c", 5000, 5, 9000, 0, false)
	compare("taken over", head+series("0", 3200, 4, 700, 2600, 350, 1)+series("1", 0, 0, 5000, 9000, 0, 1))
	snap(1, "c", 5600, 6, 9000, 600, false)
	compare("a chunk after the takeover", head+series("0", 3200, 4, 700, 2600, 350, 1)+series("1", 600, 1, 5600, 9000, 600, 1))

	// Partition 1 leaves this member: its series go; when it comes back
	// with more done elsewhere, that is not counted here either.
	m.OnState(ferry.StateInfo{Stream: "s", Partition: 1, State: ferry.StateStopped})
	compare("partition 1 handed off", head+series("0", 3200, 4, 700, 2600, 350, 1))
	snap(1, "c", 8000, 9, 9000, 0, false)
	snap(1, "c", 9000, 10, 9000, 800, true)
	compare("partition 1 back, finished", head+series("0", 3200, 4, 700, 2600, 350, 1)+series("1", 1000, 1, 9000, 9000, 800, 0))
}

// TestSnapshotChunkFailures: ferry_snapshot_chunk_failures follows the
// failed tries of the snapshot's current chunk, back to 0 once one
// finishes.
func TestSnapshotChunkFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	report := func(done int64, failures int) {
		m.OnSnapshot(ferry.SnapshotInfo{Stream: "s", Partition: 1, Progress: ferry.SnapshotProgress{ID: "a", Done: done, Chunks: done / 100,
			Total: 1000, Failures: failures, Error: "boom", Started: time.Now()}})
	}
	want := func(step string, v int) {
		t.Helper()
		exp := fmt.Sprintf(`# HELP ferry_snapshot_chunk_failures Failed tries of the chunk the partition's snapshot is at (0 once a chunk finished): above 0, a chunk is being retried.
# TYPE ferry_snapshot_chunk_failures gauge
ferry_snapshot_chunk_failures{partition="1",stream="s"} %d
`, v)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "ferry_snapshot_chunk_failures"); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	report(100, 0)
	want("a chunk done", 0)
	report(100, 3)
	want("the next failing", 3)
	report(200, 0)
	want("it went through", 0)
}
