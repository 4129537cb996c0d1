package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// report is everything one bench run measured.
type report struct {
	Date        string     `json:"date"`
	Machine     machine    `json:"machine"`
	Source      string     `json:"source"` // "emulator" (a child process per measurement) or "cluster" (-uri)
	Backlog     int        `json:"backlog_events"`
	DocBytes    int        `json:"payload_bytes"`
	Runs        int        `json:"runs"`
	RSSPerRun   bool       `json:"peak_rss_per_measurement"` // false: the figures are the process's lifetime peak
	Rows        []row      `json:"rows,omitempty"`
	Sweep       []sweepRow `json:"rss_sweep,omitempty"`
	SweepSizes  []int      `json:"rss_sweep_sizes,omitempty"`
	MethodNotes []string   `json:"method"`
}

type machine struct {
	CPUs  int    `json:"cpus"`
	Model string `json:"cpu_model,omitempty"`
	OS    string `json:"os"`
	Go    string `json:"go"`
	// Load is the 1-minute load average when the bench started and when
	// it ended (Linux; other processes' work skews the rates, less so the
	// CPU per event).
	Load []float64 `json:"load_average_1m,omitempty"`
}

// row is one line of the table: a configuration's (or the raw loop's)
// medians over the runs, and every run.
type row struct {
	Name          string         `json:"name"` // raw-cold, raw-warm, or a configuration's -only name
	Title         string         `json:"title"`
	Sink          string         `json:"sink,omitempty"`
	Mode          string         `json:"mode,omitempty"`
	Partitions    int            `json:"partitions,omitempty"`
	EventsPerS    float64        `json:"events_per_s"`
	VsWarmRaw     float64        `json:"vs_warm_raw"`
	FerryCPUUS    float64        `json:"ferry_cpu_us_per_event"`
	EmulatorCPUUS *float64       `json:"emulator_cpu_us_per_event"`
	ReceiverCPUUS *float64       `json:"receiver_cpu_us_per_event"`
	PeakRSSBytes  int64          `json:"peak_rss_bytes"`
	StartupMS     *float64       `json:"startup_ms,omitempty"`
	MinDistinct   int64          `json:"min_distinct"`   // the fewest distinct events a run delivered (-1 unknown)
	MaxDuplicates int64          `json:"max_duplicates"` // the most duplicates a run delivered
	CountedHow    string         `json:"counted_how"`
	Measurements  []*measurement `json:"measurements"` // the runs that succeeded
	// Error is why the configuration failed, in the run it failed; its
	// later runs were skipped. The figures are its earlier runs', if any.
	Error string `json:"error,omitempty"`
}

// sweepRow is one configuration's peak RSS per backlog size.
type sweepRow struct {
	Name         string    `json:"name"`
	Title        string    `json:"title"`
	PeakRSSBytes []int64   `json:"peak_rss_bytes"`  // per size, medians over the runs
	StartRSS     []int64   `json:"start_rss_bytes"` // per size: this process's RSS when the daemon started, medians
	EventsPerS   []float64 `json:"events_per_s"`
	MaxOverMin   float64   `json:"max_over_min"`
}

func newReport(o *settings) *report {
	src := "emulator"
	if o.uri != "" {
		src = "cluster"
	}
	return &report{Date: time.Now().UTC().Format("2006-01-02"), Source: src, Backlog: o.n, DocBytes: docBytes, Runs: o.runs,
		RSSPerRun: peakRSSResettable(),
		Machine:   machine{CPUs: runtime.NumCPU(), Model: cpuModel(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}}
}

// loadAverage is the 1-minute load average, if the system tells it.
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// noteLoad records the load average now.
func (r *report) noteLoad() {
	if v, ok := loadAverage(); ok {
		r.Machine.Load = append(r.Machine.Load, v)
	}
}

// cpuModel is the first "model name" of /proc/cpuinfo, if any.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// summarize makes a row of the runs of one configuration; warm are the
// same runs' warm raw measurements, for the ratios.
func summarize(name, title string, ms, warm []*measurement) row {
	r := row{Name: name, Title: title, Measurements: ms, MinDistinct: -1}
	var rates, ratios, ferry, emu, rcv, rss, startup []float64
	emuKnown, rcvKnown, startKnown := true, true, true
	for i, m := range ms {
		rates = append(rates, m.rate())
		if i < len(warm) && warm[i].rate() > 0 {
			ratios = append(ratios, m.rate()/warm[i].rate())
		}
		ferry = append(ferry, m.perEvent(m.FerryCPU))
		if m.EmulatorCPU != nil {
			emu = append(emu, m.perEvent(*m.EmulatorCPU))
		} else {
			emuKnown = false
		}
		if m.ReceiverCPU != nil {
			rcv = append(rcv, m.perEvent(*m.ReceiverCPU))
		} else {
			rcvKnown = false
		}
		if m.Startup != nil {
			startup = append(startup, float64(m.Startup.Microseconds())/1000)
		} else {
			startKnown = false
		}
		rss = append(rss, float64(m.PeakRSS))
		if i == 0 || (m.Distinct >= 0 && (r.MinDistinct < 0 || m.Distinct < r.MinDistinct)) {
			r.MinDistinct = m.Distinct
		}
		r.MaxDuplicates = max(r.MaxDuplicates, m.Duplicates)
		r.CountedHow = m.CountedHow
	}
	r.EventsPerS, r.VsWarmRaw, r.FerryCPUUS = median(rates), median(ratios), median(ferry)
	r.PeakRSSBytes = int64(median(rss))
	if emuKnown && len(emu) > 0 {
		v := median(emu)
		r.EmulatorCPUUS = &v
	}
	if rcvKnown && len(rcv) > 0 {
		v := median(rcv)
		r.ReceiverCPUUS = &v
	}
	if startKnown && len(startup) > 0 {
		v := median(startup)
		r.StartupMS = &v
	}
	return r
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// tableColumns are the table's column headers.
var tableColumns = []string{"configuration", "events/s", "vs warm raw", "Ferry CPU µs/event", "emulator CPU µs/event",
	"receiver CPU µs/event", "peak RSS MiB", "delivered"}

// writeTable prints the report as aligned text.
func (r *report) writeTable(w io.Writer) {
	backlog := fmt.Sprint(r.Backlog)
	if len(r.SweepSizes) > 0 {
		backlog = "backlogs of " + strings.ReplaceAll(joinInts(r.SweepSizes), ",", ", ")
	}
	fmt.Fprintf(w, "ferry bench, %s: %s × %d-byte inserts per configuration, %s, %d CPUs (%s), %s, %s\n",
		r.Date, backlog, r.DocBytes, r.sourceText(), r.Machine.CPUs, r.Machine.Model, r.Machine.OS, r.Machine.Go)
	if len(r.Machine.Load) == 2 {
		fmt.Fprintf(w, "load average (1 min): %.2f at the start, %.2f at the end\n", r.Machine.Load[0], r.Machine.Load[1])
	}
	if r.Runs > 1 {
		fmt.Fprintf(w, "medians of %d runs\n", r.Runs)
	}
	if len(r.Rows) > 0 {
		cells := [][]string{tableColumns}
		for _, x := range r.Rows {
			if len(x.Measurements) == 0 {
				cells = append(cells, []string{x.Title, "—", "—", "—", "—", "—", "—", "FAILED"})
				continue
			}
			delivered := deliveredText(x, r.Backlog)
			if x.Error != "" {
				delivered += " FAILED later"
			}
			cells = append(cells, []string{x.Title, rateText(x.EventsPerS), ratioText(x.VsWarmRaw), fmt.Sprintf("%.1f", x.FerryCPUUS),
				optText(x.EmulatorCPUUS), optText(x.ReceiverCPUUS), fmt.Sprintf("%.1f", float64(x.PeakRSSBytes)/(1<<20)),
				delivered})
		}
		writeAligned(w, cells)
		for _, x := range r.Rows {
			if x.Error != "" {
				fmt.Fprintln(w, wrap(fmt.Sprintf("FAILED %s: %s", x.Name, firstLine(x.Error, 300)), 100, "  "))
			}
		}
	}
	if len(r.Sweep) > 0 {
		head := []string{"peak RSS MiB (events/s)"}
		for _, n := range r.SweepSizes {
			head = append(head, fmt.Sprintf("%d events", n))
		}
		head = append(head, "largest/smallest")
		cells := [][]string{head}
		for _, s := range r.Sweep {
			line := []string{s.Title}
			for i, b := range s.PeakRSSBytes {
				line = append(line, fmt.Sprintf("%.1f (%s)", float64(b)/(1<<20), rateText(s.EventsPerS[i])))
			}
			cells = append(cells, append(line, fmt.Sprintf("%.2f", s.MaxOverMin)))
		}
		writeAligned(w, cells)
		var lo, hi int64
		for _, s := range r.Sweep {
			for _, b := range s.StartRSS {
				if lo == 0 || b < lo {
					lo = b
				}
				hi = max(hi, b)
			}
		}
		if hi > 0 { // Linux only
			fmt.Fprintf(w, "this process's RSS when each daemon started (what the bench itself holds): %.1f to %.1f MiB\n",
				float64(lo)/(1<<20), float64(hi)/(1<<20))
		}
	}
	for _, n := range r.MethodNotes {
		fmt.Fprintln(w, wrap("- "+n, 100, "  "))
	}
}

// failures is an error naming every configuration that failed, or nil.
func (r *report) failures() error {
	var names []string
	for _, x := range r.Rows {
		if x.Error != "" {
			names = append(names, x.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d configurations failed (%s); the progress lines on stderr have each one's error and the daemon's log",
		len(names), len(r.Rows)-2, strings.Join(names, ", "))
}

// firstLine is s up to its first newline, at most n runes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}

func (r *report) sourceText() string {
	if r.Source == "cluster" {
		return "against the -uri cluster"
	}
	return "emulator in a child process"
}

// writeJSON prints the report as one JSON document.
func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeAligned prints cells as columns: the first left-aligned, the
// others right-aligned, two spaces apart.
func writeAligned(w io.Writer, cells [][]string) {
	widths := make([]int, len(cells[0]))
	for _, line := range cells {
		for i, c := range line {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, line := range cells {
		var b strings.Builder
		for i, c := range line {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0:
				b.WriteString(c + pad)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func rateText(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2fM", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1fk", r/1e3)
	}
	return fmt.Sprintf("%.0f", r)
}

func ratioText(r float64) string {
	switch {
	case r == 0:
		return "—"
	case r >= 0.995 && r <= 1.005:
		return "1"
	case r < 0.1:
		return strconv.FormatFloat(r, 'g', 2, 64) // two significant digits: 0.079, 0.0044
	}
	return fmt.Sprintf("%.2f", r)
}

func optText(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f", *v)
}

// deliveredText is the fewest distinct events a run delivered, of the
// backlog, and the most duplicates.
func deliveredText(x row, n int) string {
	var s string
	if x.MinDistinct < 0 {
		s = "? distinct"
	} else {
		s = fmt.Sprintf("%d/%d", x.MinDistinct, n)
	}
	if x.MaxDuplicates > 0 {
		s += fmt.Sprintf(" +%d dup", x.MaxDuplicates)
	}
	return s
}

// wrap breaks s into lines of at most width runes, continuing with indent.
func wrap(s string, width int, indent string) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width {
			lines = append(lines, line)
			line = indent + word
			continue
		}
		if line == "" {
			line = word
		} else {
			line += " " + word
		}
	}
	return strings.Join(append(lines, line), "\n")
}
