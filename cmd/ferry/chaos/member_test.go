package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMemberLog: restarts, backfills and failures are read from a member's
// JSON log, and a stopped member gives up a partition by losing it, having
// it revoked or stopped, or by losing its membership (every partition).
func TestMemberLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.log")
	lines := []string{
		`{"time":"2026-12-01T10:00:00Z","level":"INFO","msg":"partition assigned","partition":1,"epoch":1}`,
		`{"time":"2026-12-01T10:00:01Z","level":"WARN","msg":"partition lost","partition":1,"err":"lease: lost"}`,
		`{"time":"2026-12-01T10:00:02Z","level":"WARN","msg":"partition stopped; restarting it after a backoff","partition":2}`,
		`{"time":"2026-12-01T10:00:03Z","level":"INFO","msg":"snapshot started","partition":3}`,
		`{"time":"2026-12-01T10:00:04Z","level":"ERROR","msg":"stream failed: its leases are released and this member takes none of them while failed"}`,
		`{"time":"2026-12-01T10:00:05Z","level":"WARN","msg":"membership lost; rejoining"}`,
		`panic: not a log line`,
		// A history-lost failure: the group's line names the partition,
		// the daemon's advice line repeats it.
		`{"time":"2026-12-01T10:00:06Z","level":"INFO","msg":"snapshot started","partition":2}`,
		`{"time":"2026-12-01T10:00:07Z","level":"ERROR","msg":"stream failed: its leases are released and this member takes none of them while failed","class":"history-lost","partition":2,"err":"stream \"chaos\" partition 2: 2 backfills in a row ended with their start marker outside the oplog"}`,
		`{"time":"2026-12-01T10:00:07Z","level":"WARN","msg":"stream failed: what to do","stream":"chaos","class":"history-lost","advice":"..."}`,
	}
	write := func(lines []string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(lines)
	ml, err := readLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.restarts) != 3 || ml.backfills != 2 || len(ml.failed) != 1 || ml.errors != 2 || len(ml.other) != 1 {
		t.Errorf("restarts=%d backfills=%d failed=%d errors=%d other=%d, want 3 2 1 2 1", len(ml.restarts), ml.backfills, len(ml.failed), ml.errors, len(ml.other))
	}
	at := func(s int) time.Time { return time.Date(2026, 12, 1, 10, 0, s, 0, time.UTC) }
	if !ml.lastBackfill.Equal(at(6)) {
		t.Errorf("last backfill at %v, want %v", ml.lastBackfill, at(6))
	}
	if len(ml.historyLost) != 1 || ml.historyLost[0].Partition != 2 || !ml.historyLost[0].At.Equal(at(7)) ||
		!strings.Contains(ml.historyLost[0].Err, "2 backfills in a row") {
		t.Errorf("history-lost failures %+v, want partition 2's at 10:00:07 with its reason", ml.historyLost)
	}
	for _, tc := range []struct {
		since time.Time
		want  []int
	}{
		{at(0), nil},            // membership lost at 5 gives up everything
		{at(1), nil},            // likewise
		{at(6), nil},            // the stream failed at 7: its leases are released
		{at(8), []int{1, 2, 3}}, // nothing logged since
	} {
		if got := stillHeld(path, []int{1, 2, 3}, tc.since); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("stillHeld since %v = %v, want %v", tc.since.Format(time.TimeOnly), got, tc.want)
		}
	}
	// Without the membership and failure lines: 1 (lost) and 2 (stopped)
	// are given up, 3 is not.
	write(lines[:4])
	if got := stillHeld(path, []int{1, 2, 3}, at(0)); !reflect.DeepEqual(got, []int{3}) {
		t.Errorf("stillHeld = %v, want [3]", got)
	}
}
