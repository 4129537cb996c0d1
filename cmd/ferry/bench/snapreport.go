package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// snapReport is everything one `bench snapshot` run measured and judged.
type snapReport struct {
	Date       string   `json:"date"`
	Machine    machine  `json:"machine"`
	Docs       int      `json:"documents"`
	DocBytes   int      `json:"document_bytes"`
	Partitions int      `json:"partitions"`
	Members    int      `json:"members"`
	Chunk      int      `json:"chunk"`
	LeaseTTL   string   `json:"lease_ttl"`
	Scenarios  []string `json:"scenarios"`
	Figures    []figure `json:"figures"`
	// Errors: the scenarios that could not finish, and why. Their figures
	// so far are in Figures.
	Errors      []scenarioError `json:"errors,omitempty"`
	MethodNotes []string        `json:"method"`
}

type scenarioError struct {
	Scenario string `json:"scenario"`
	Error    string `json:"error"`
}

// figure is one line of the report: a measured value and, when it has one,
// its target and verdict.
type figure struct {
	Scenario string  `json:"scenario"`
	Key      string  `json:"key"` // stable: scenario.name
	Title    string  `json:"title"`
	Value    float64 `json:"value"`
	Text     string  `json:"text"`             // the value as printed
	Target   string  `json:"target,omitempty"` // "" when the figure is information only
	Pass     *bool   `json:"pass,omitempty"`
}

func (f figure) verdict() string {
	switch {
	case f.Pass == nil:
		return ""
	case *f.Pass:
		return "PASS"
	}
	return "FAIL"
}

func newSnapReport(o *snapSettings) *snapReport {
	return &snapReport{Date: time.Now().UTC().Format("2006-01-02"), Docs: o.docs, DocBytes: o.docSize, Partitions: o.partitions,
		Members: o.members, Chunk: o.chunk, LeaseTTL: o.leaseTTL.String(), Scenarios: o.scenarios,
		Machine: machine{CPUs: runtime.NumCPU(), Model: cpuModel(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}}
}

// info adds a figure without a target.
func (r *snapReport) info(scenario, key, title string, value float64, text string) {
	r.Figures = append(r.Figures, figure{Scenario: scenario, Key: scenario + "." + key, Title: title, Value: value, Text: text})
}

// judge adds a figure with its target and verdict.
func (r *snapReport) judge(scenario, key, title string, value float64, text, target string, pass bool) {
	r.Figures = append(r.Figures, figure{Scenario: scenario, Key: scenario + "." + key, Title: title, Value: value, Text: text,
		Target: target, Pass: &pass})
}

// figure returns the figure with key, if any.
func (r *snapReport) figure(key string) (figure, bool) {
	for _, f := range r.Figures {
		if f.Key == key {
			return f, true
		}
	}
	return figure{}, false
}

// failures is an error naming every failed figure and scenario, or nil.
func (r *snapReport) failures() error {
	var bad []string
	for _, f := range r.Figures {
		if f.Pass != nil && !*f.Pass {
			bad = append(bad, f.Key)
		}
	}
	for _, e := range r.Errors {
		bad = append(bad, e.Scenario+" (did not finish)")
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%d failed: %s", len(bad), strings.Join(bad, ", "))
}

func (r *snapReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "ferry bench snapshot, %s: %d documents of about %d bytes, %d partitions on %d members, chunk %d, lease_ttl %s; %d CPUs (%s), %s, %s\n",
		r.Date, r.Docs, r.DocBytes, r.Partitions, r.Members, r.Chunk, r.LeaseTTL, r.Machine.CPUs, r.Machine.Model, r.Machine.OS, r.Machine.Go)
	if len(r.Machine.Load) == 2 {
		fmt.Fprintf(w, "load average (1 min): %.2f at the start, %.2f at the end\n", r.Machine.Load[0], r.Machine.Load[1])
	}
	cells := [][]string{{"scenario", "figure", "value", "target", "verdict"}}
	for _, f := range r.Figures {
		target := f.Target
		if target == "" {
			target = "—"
		}
		cells = append(cells, []string{f.Scenario, f.Title, f.Text, target, f.verdict()})
	}
	writeLeftAligned(w, cells)
	for _, e := range r.Errors {
		fmt.Fprintln(w, wrap(fmt.Sprintf("FAILED %s: %s", e.Scenario, firstLine(e.Error, 600)), 100, "  "))
	}
	passed, failed := 0, 0
	for _, f := range r.Figures {
		switch f.verdict() {
		case "PASS":
			passed++
		case "FAIL":
			failed++
		}
	}
	fmt.Fprintf(w, "verdicts: %d PASS, %d FAIL", passed, failed)
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, ", %d scenario(s) did not finish", len(r.Errors))
	}
	fmt.Fprintln(w)
	for _, n := range r.MethodNotes {
		fmt.Fprintln(w, wrap("- "+n, 100, "  "))
	}
}

// writeLeftAligned prints cells as left-aligned columns, two spaces apart.
func writeLeftAligned(w io.Writer, cells [][]string) {
	widths := make([]int, len(cells[0]))
	for _, line := range cells {
		for i, c := range line {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, line := range cells {
		var b strings.Builder
		for i, c := range line {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func (r *snapReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func snapMethodNotes(o *snapSettings) []string {
	return []string{
		"Each scenario starts two emulators (mongotest) as child processes: the source, holding the collection ({_id: int64, g: _id mod 10, v, payload}, loaded with insertMany), and the target, holding the state store and the mongodb projection (sink/mongoproj), so that the source's counters and oplog see only the stream's reads and the scenario's writes.",
		fmt.Sprintf("The members are %d child processes, each running the consumer group `ferry run` builds from one generated configuration file (the config package's sink, group and consumer options; start_at: now; at-least-once; the mongodb sink, or in reads and filter a no-op handler) plus the snapshot settings (SnapshotChunkSize %d, SnapshotPollInterval %s, SnapshotMaxRate as the scenario says) set as its snapshot block would. A snapshot is an operator's request written to the state store (checkpoint.SnapshotRequests, as `ferry snapshot` does) once the members share the partitions.", o.members, o.chunk, o.poll),
		"Snapshot rates are the documents the partitions' records count as done over the time from the first partition's start to the last one's end (the records' Started and Finished). The raw loop is one find {} with the chunk size as its batch size, read to the end in this process, the best of two reads, on the same emulator just before.",
		"Server reads: the source's serverStatus metrics.document.returned and metrics.queryExecutor.scannedObjects, read before the request and after the last partition finished, over the collection's size.",
		"Rows: each member's handler reports the _id of every snapshot row the sink took (acknowledged), on its stdout, before it returns; a member killed with SIGKILL has reported every row it finished. Read again: rows beyond the first per _id, attributed to the _id's partition.",
		"Projection equals source: both read in _id order after the stream applied everything up to a marker written after the last change (every partition's checkpoint at or past it); every field but _ferry compared; missing = in the source, not live in the projection; resurrected = live in the projection, not in the source; stale = both, different.",
		"Lag: each member's owned partitions every 200 ms, ferry_lag_seconds' definition (now minus the cluster time of the oldest event read and not yet applied, as the consumer's queue hook last reported it; cluster times have whole seconds). Oplog window: the source's newest cluster time minus its oldest entry's (ferry's OplogStart probe), every 250 ms, whole seconds.",
		"Before the load, the bench makes one snapshot read on the source: MongoDB keeps minSnapshotHistoryWindowInSeconds (300 s) of history for snapshot reads at all times, the emulator only from its first snapshot read on. Without it the stream's first position (just before the load's last write) is older than the emulator's history, and the first chunks fail SnapshotTooOld and back off until the position moves (20 to 40 s at 5,000 documents).",
		"Peak RSS: each process's own high-water mark (VmHWM, its whole life: the emulator's includes the load), read before it stops; a killed member's from wait4's rusage.",
	}
}
