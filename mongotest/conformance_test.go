package mongotest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/mongotest/internal/specdata"
	"github.com/ferry-io/ferry/mongotest/internal/unified"
)

// suite is one folder of ../shared/mongo-spec: MongoDB's unified tests of
// one specification.
type suite struct {
	name string
	// knownFailures lists the suite's tests the emulator is known to fail,
	// each with why. A key is a test description, or
	// "file.json/description" when the description repeats across files.
	// A listed test that passes fails TestConformance, so the list has to
	// shrink as the emulator improves.
	knownFailures map[string]string
}

// suites are the specifications the emulator is measured against, in the
// order their summary lines are printed.
var suites = []suite{
	{name: "change-streams", knownFailures: map[string]string{}},
	{name: "transactions", knownFailures: transactionsKnownFailures},
	{name: "transactions-convenient-api", knownFailures: map[string]string{}},
	{name: "retryable-writes", knownFailures: retryableWritesKnownFailures},
	{name: "sessions", knownFailures: map[string]string{}},
	{name: "crud", knownFailures: crudKnownFailures},
}

// TestConformance runs MongoDB's published unified tests, one suite per
// specification, against the emulator, or against FERRY_TEST_MONGODB_URI
// when it is set, and prints one summary line per suite:
//
//	conformance: change-streams: N passed, M failed, K skipped
//
// followed by every test that did not pass, with its reason.
// FERRY_MONGO_SPEC_DIR overrides where the suites' folders are
// (default ../shared/mongo-spec beside the project); without them the test
// skips, or fails with FERRY_REQUIRE_SPEC=1 (package specdata).
func TestConformance(t *testing.T) {
	// Every suite's files first: a missing suite skips (or fails) the
	// test before any server starts.
	suiteFiles := make([][]string, len(suites))
	for si, s := range suites {
		suiteFiles[si] = specdata.Files(t, s.name)
	}
	// Against the emulator, every file runs under two release profiles,
	// 8.0 (the default) and 8.2, so tests gated on a newer release run too.
	// A test passes if it passes under a profile it applies to, fails if it
	// fails under any, and is skipped only if no profile applies.
	//
	// Against the emulator every file gets a server of its own (a primary
	// and a secondary), so no file sees what another left behind, and up
	// to 8 files run at once: most of a file's time is the driver waiting
	// out its rediscovery after a dropped connection (500 ms), so
	// concurrency, not the CPU, bounds the run. A real deployment runs one
	// file at a time.
	var profiles []profile
	slots := 8
	if uri := os.Getenv("FERRY_TEST_MONGODB_URI"); uri != "" {
		slots = 1
		profiles = []profile{{"server", func() (string, func()) { return uri, func() {} }}}
	} else {
		for _, v := range []string{"8.0.4", "8.2.1"} {
			profiles = append(profiles, profile{v, func() (string, func()) {
				srv := mongotest.NewServer(mongotest.ServerVersion(v), mongotest.Secondaries(1))
				return srv.URI(), func() {
					// Replies copy the stored documents' encodings: each
					// must still be its document's after the file's writes.
					for _, msg := range mongotest.StoredEncodingErrors(srv) {
						t.Error(msg)
					}
					srv.Close()
				}
			}})
		}
	}
	for _, l := range runConformance(t, suites, suiteFiles, profiles, slots, "") {
		fmt.Println(l)
	}
}

// profile is a server the conformance suites run against.
type profile struct {
	name string
	// server returns the URI to run a file against and a function
	// that releases it.
	server func() (string, func())
}

// runConformance runs every suite's files under every profile, at most
// slots files at once, and returns the summary: a line per suite
// ("conformance: <label><suite>: ...") and one per test that did not pass.
func runConformance(t *testing.T, suites []suite, suiteFiles [][]string, profiles []profile, slots int, label string) []string {
	sem := make(chan struct{}, slots)
	// results[suite][profile][file] are the results of one file.
	results := make([][][][]unified.Result, len(suites))
	var wg sync.WaitGroup
	for si, s := range suites {
		files := suiteFiles[si]
		results[si] = make([][][]unified.Result, len(profiles))
		for pi, p := range profiles {
			results[si][pi] = make([][]unified.Result, len(files))
			name := s.name + "/" + label + p.name
			for fi, path := range files {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					uri, release := p.server()
					defer release()
					t.Run(name+"/"+strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
						results[si][pi][fi] = unified.RunFile(t, path, uri, unified.ExpectFailures(s.knownFailures))
					})
				}()
			}
		}
	}
	wg.Wait()
	var summary []string
	for si, s := range suites {
		if suiteFiles[si] == nil {
			continue
		}
		merged := map[string]unified.Result{}
		var order []string
		for pi, p := range profiles {
			for fi := range suiteFiles[si] {
				for _, r := range results[si][pi][fi] {
					key := r.File + "/" + r.Test
					prev, seen := merged[key]
					if !seen {
						order = append(order, key)
					}
					switch {
					case !seen, prev.Status == unified.Skipped:
						merged[key] = r
					case r.Status == unified.Failed:
						r.Reason = "(" + p.name + ") " + r.Reason
						merged[key] = r
					}
				}
			}
		}
		counts := map[unified.Status]int{}
		var lines []string
		for _, k := range order {
			r := merged[k]
			if r.Status == unified.Skipped && len(profiles) > 1 {
				r.Reason += " (skipped under every emulated release: 8.0.4 and 8.2.1)"
			}
			counts[r.Status]++
			if r.Status == unified.Passed {
				continue
			}
			status := r.Status.String()
			if r.Expected {
				status += " (expected)"
			}
			lines = append(lines, fmt.Sprintf("  %s %s / %s: %s", status, r.File, r.Test, r.Reason))
		}
		summary = append(summary, fmt.Sprintf("conformance: %s%s: %d passed, %d failed, %d skipped",
			label, s.name, counts[unified.Passed], counts[unified.Failed], counts[unified.Skipped]))
		summary = append(summary, lines...)
	}
	return summary
}
