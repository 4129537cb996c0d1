package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The checker compares what the writer did with what the sink received.
// It is a pure function of its input (check), so a doctored history shows
// that it catches each kind of violation (check_test.go).

// A write is one change the writer made to the source, acknowledged by the
// server: its document, the version it gave the document (every write
// bumps the document's field v; a delete gets the next version although
// the deleted document cannot carry it), its operation, and when it was
// sent (zero for TTL expiries, which the TTL monitor made at a time the
// writer does not know).
type write struct {
	Doc string
	V   int
	Op  string // insert, update, replace, delete
	At  time.Time
	TTL bool // a delete by the TTL monitor
}

// A delivery is one request the sink received (the webhook receiver), or
// one write the projection saw (the mongodb sink): the event id it
// carried, the operation, the document, the version (none for deletes:
// the checker takes the delete's version from the writer's history), the
// lease epoch of the member that sent it, when it arrived, and the HTTP
// status the receiver answered (a projection write counts as 200).
// Backfill deliveries carry a scanned document rather than a change.
type delivery struct {
	ID       string
	Op       string
	Doc      string
	V        int // -1: none (deletes)
	Epoch    int64
	At       time.Time
	Code     int
	Backfill bool
}

func (d delivery) accepted() bool { return d.Code >= 200 && d.Code < 300 }

// A fault is one injected fault and the time it began; its window runs
// until the next fault begins (the last one's until the end of the run).
type fault struct {
	Kind  string // kill9, sigstop, failpoint, http5xx, refuse
	Desc  string // what exactly, for the report
	Start time.Time
	// Problem is what went wrong with the fault itself (a zombie that
	// never gave its partitions up): it fails the run.
	Problem string
}

// checkInput is everything check compares.
type checkInput struct {
	Writes     []write
	Deliveries []delivery // in arrival order
	Faults     []fault
	// FinalState: the run lost history on purpose (a tiny oplog, with
	// on_history_lost: backfill), so the changes made while it was lost
	// cannot all be delivered: instead of every change, the latest version
	// of every live document must have been delivered (as a change or by a
	// backfill scan). Live maps each live source document to its version.
	FinalState bool
	Live       map[string]int
	// GaveUp are the partitions whose history a member gave up on (a
	// stream failed history-lost); PartitionOf maps a document to its
	// partition. In a FinalState check, a live document of such a
	// partition whose latest version was never delivered is unrecoverable,
	// not lost: the library said so instead of skipping it silently.
	GaveUp      map[int]bool
	PartitionOf func(doc string) int
	// Restarts are the times members logged a partition stopping (lost,
	// or stopped and restarted after a backoff).
	Restarts []time.Time
}

// change identifies one change: (document, version, operation).
type change struct {
	Doc string
	V   int
	Op  string
}

func (c change) String() string { return fmt.Sprintf("%s v%d %s", c.Doc, c.V, c.Op) }

// A dupEffect is one change applied under more than one event id.
type dupEffect struct {
	Change change
	IDs    []string
}

// An orderViolation is a document whose first deliveries went backwards:
// version V arrived after version After had.
type orderViolation struct {
	Doc      string
	V, After int
}

// A zombieEffect is a first delivery from an older lease epoch than an
// earlier first delivery of the same document: a fenced-off owner applied
// a change after its successor had applied an earlier one.
type zombieEffect struct {
	Doc          string
	V            int
	Epoch, After int64
}

// faultResult is what happened after one fault.
type faultResult struct {
	Fault      fault
	Writes     int           // writes sent in its window
	WorstDelay time.Duration // the longest write → first delivery in its window
	Restarts   int           // partition restarts logged in its window
}

// checkResult is the checker's verdict.
type checkResult struct {
	Writes, Delivered int
	Lost              []change
	// Unrecoverable are the latest versions never delivered of documents
	// in a partition whose history was given up (FinalState only).
	Unrecoverable []change
	Dups          []dupEffect
	Order         []orderViolation
	Zombie        []zombieEffect
	// Unexpected deliveries carry a change the writer never made.
	Unexpected []delivery
	Faults     []faultResult
	Baseline   time.Duration // worst delay of the writes before the first fault
	WorstDelay time.Duration // worst over the faults' windows
	Restarts   int
}

// check compares the writer's history with the deliveries.
func check(in checkInput) checkResult {
	var r checkResult
	r.Writes = len(in.Writes)
	made := map[change]write{}
	deleteV := map[string]int{} // document → its delete's version
	for _, w := range in.Writes {
		made[change{w.Doc, w.V, w.Op}] = w
		if w.Op == "delete" {
			deleteV[w.Doc] = w.V
		}
	}
	// The first accepted delivery of each event id is its effect; later
	// ones are redeliveries the receiver absorbs by id.
	seenID := map[string]bool{}
	first := map[change]delivery{} // a change's first effect
	ids := map[change][]string{}
	lastV := map[string]int{}
	maxEpoch := map[string]int64{}
	for _, d := range in.Deliveries {
		if !d.accepted() || seenID[d.ID] {
			continue
		}
		seenID[d.ID] = true
		if d.Backfill {
			if d.V < 0 || !madeVersion(made, d.Doc, d.V) {
				r.Unexpected = append(r.Unexpected, d)
			}
			continue
		}
		v := d.V
		if d.Op == "delete" {
			dv, ok := deleteV[d.Doc]
			if !ok {
				r.Unexpected = append(r.Unexpected, d)
				continue
			}
			v = dv
		}
		c := change{d.Doc, v, d.Op}
		if _, ok := made[c]; !ok {
			r.Unexpected = append(r.Unexpected, d)
			continue
		}
		r.Delivered++
		ids[c] = append(ids[c], d.ID)
		if _, ok := first[c]; !ok {
			first[c] = d
		}
		if prev, ok := lastV[d.Doc]; ok && v < prev {
			r.Order = append(r.Order, orderViolation{Doc: d.Doc, V: v, After: prev})
		}
		lastV[d.Doc] = max(lastV[d.Doc], v)
		if e, ok := maxEpoch[d.Doc]; ok && d.Epoch < e {
			r.Zombie = append(r.Zombie, zombieEffect{Doc: d.Doc, V: v, Epoch: d.Epoch, After: e})
		}
		maxEpoch[d.Doc] = max(maxEpoch[d.Doc], d.Epoch)
	}
	for c, list := range ids {
		if len(list) > 1 {
			r.Dups = append(r.Dups, dupEffect{Change: c, IDs: list})
		}
	}
	sort.Slice(r.Dups, func(i, j int) bool { return lessChange(r.Dups[i].Change, r.Dups[j].Change) })
	if in.FinalState {
		latest := map[string]bool{} // document/version delivered, change or backfill
		for _, d := range in.Deliveries {
			if d.accepted() && d.V >= 0 {
				latest[fmt.Sprintf("%s/%d", d.Doc, d.V)] = true
			}
		}
		for doc, v := range in.Live {
			if latest[fmt.Sprintf("%s/%d", doc, v)] {
				continue
			}
			c := change{Doc: doc, V: v, Op: "latest"}
			if in.GaveUp[in.partitionOf(doc)] {
				r.Unrecoverable = append(r.Unrecoverable, c)
			} else {
				r.Lost = append(r.Lost, c)
			}
		}
	} else {
		for c := range made {
			if _, ok := first[c]; !ok {
				r.Lost = append(r.Lost, c)
			}
		}
	}
	sort.Slice(r.Lost, func(i, j int) bool { return lessChange(r.Lost[i], r.Lost[j]) })
	sort.Slice(r.Unrecoverable, func(i, j int) bool { return lessChange(r.Unrecoverable[i], r.Unrecoverable[j]) })

	// Delays and restarts, by fault window.
	faults := append([]fault(nil), in.Faults...)
	sort.Slice(faults, func(i, j int) bool { return faults[i].Start.Before(faults[j].Start) })
	window := func(t time.Time) int { // index of the fault whose window holds t, -1 before the first
		return sort.Search(len(faults), func(i int) bool { return faults[i].Start.After(t) }) - 1
	}
	r.Faults = make([]faultResult, len(faults))
	for i, f := range faults {
		r.Faults[i].Fault = f
	}
	for _, w := range in.Writes {
		if w.At.IsZero() {
			continue
		}
		d, ok := first[change{w.Doc, w.V, w.Op}]
		if !ok {
			continue
		}
		delay := max(d.At.Sub(w.At), 0)
		if i := window(w.At); i < 0 {
			r.Baseline = max(r.Baseline, delay)
		} else {
			r.Faults[i].Writes++
			r.Faults[i].WorstDelay = max(r.Faults[i].WorstDelay, delay)
			r.WorstDelay = max(r.WorstDelay, delay)
		}
	}
	for _, t := range in.Restarts {
		r.Restarts++
		if i := window(t); i >= 0 {
			r.Faults[i].Restarts++
		}
	}
	return r
}

func (in checkInput) partitionOf(doc string) int {
	if in.PartitionOf == nil {
		return -1
	}
	return in.PartitionOf(doc)
}

// madeVersion reports whether the writer gave doc version v by an insert,
// update or replace (what a backfill scan can have read).
func madeVersion(made map[change]write, doc string, v int) bool {
	for _, op := range []string{"insert", "update", "replace"} {
		if _, ok := made[change{doc, v, op}]; ok {
			return true
		}
	}
	return false
}

func lessChange(a, b change) bool {
	if a.Doc != b.Doc {
		return a.Doc < b.Doc
	}
	return a.V < b.V
}

// problems lists the result's violations, one line each, at most n of
// each kind; zero lines when clean.
func (r checkResult) problems(n int) []string {
	var out []string
	add := func(total int, line func(i int) string) {
		for i := 0; i < total && i < n; i++ {
			out = append(out, line(i))
		}
		if total > n {
			out = append(out, fmt.Sprintf("  ... and %d more", total-n))
		}
	}
	add(len(r.Lost), func(i int) string {
		if r.Lost[i].Op == "latest" {
			return fmt.Sprintf("lost: %s: its latest version v%d was never delivered", r.Lost[i].Doc, r.Lost[i].V)
		}
		return fmt.Sprintf("lost: %s: made by the writer, never delivered", r.Lost[i])
	})
	add(len(r.Dups), func(i int) string {
		return fmt.Sprintf("duplicate effect: %s applied under %d event ids (%s)", r.Dups[i].Change, len(r.Dups[i].IDs), shortIDs(r.Dups[i].IDs))
	})
	add(len(r.Order), func(i int) string {
		return fmt.Sprintf("order: %s: v%d delivered after v%d", r.Order[i].Doc, r.Order[i].V, r.Order[i].After)
	})
	add(len(r.Zombie), func(i int) string {
		z := r.Zombie[i]
		return fmt.Sprintf("zombie effect: %s v%d first delivered by epoch %d after epoch %d had delivered the document", z.Doc, z.V, z.Epoch, z.After)
	})
	add(len(r.Unexpected), func(i int) string {
		d := r.Unexpected[i]
		kind := d.Op
		if d.Backfill {
			kind = "backfill"
		}
		return fmt.Sprintf("unexpected: %s of %s v%d (event %s): the writer made no such change", kind, d.Doc, d.V, shortID(d.ID))
	})
	return out
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func shortIDs(ids []string) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = shortID(id)
	}
	return strings.Join(s, ", ")
}
