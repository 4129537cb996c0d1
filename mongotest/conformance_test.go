package mongotest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/internal/unified"
	"github.com/ferry-io/ferry/mongotest"
)

// knownFailures lists the spec tests the emulator is known to fail, each
// with why. A key is a test description, or "file.json/description" when
// the description repeats across files. A listed test that passes fails
// TestConformance, so the list has to shrink as the emulator improves.
var knownFailures = map[string]string{}

// TestConformance runs MongoDB's published change-stream tests (unified
// test format) against the emulator, or against FERRY_TEST_MONGODB_URI
// when it is set, and prints one summary line.
func TestConformance(t *testing.T) {
	dir := os.Getenv("FERRY_MONGO_SPEC_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "mongo-spec", "change-streams")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Skipf("no spec files in %s: put MongoDB's source/change-streams/tests/unified/*.json there or set FERRY_MONGO_SPEC_DIR", dir)
	}

	// Against the emulator, every file runs under two release profiles,
	// 8.0 (the default) and 8.2, so tests gated on a newer release run too.
	// A test passes if it passes under a profile it applies to, fails if it
	// fails under any, and is skipped only if no profile applies.
	type profile struct{ name, uri string }
	var profiles []profile
	if uri := os.Getenv("FERRY_TEST_MONGODB_URI"); uri != "" {
		profiles = []profile{{"server", uri}}
	} else {
		for _, v := range []string{"8.0.4", "8.2.1"} {
			srv := mongotest.NewServer(mongotest.ServerVersion(v))
			defer srv.Close()
			profiles = append(profiles, profile{v, srv.URI()})
		}
	}
	merged := map[string]unified.Result{}
	var order []string
	for _, p := range profiles {
		for _, path := range files {
			t.Run(p.name+"/"+strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
				for _, r := range unified.RunFile(t, path, p.uri, unified.ExpectFailures(knownFailures)) {
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
			})
		}
	}
	var results []unified.Result
	for _, k := range order {
		r := merged[k]
		if r.Status == unified.Skipped && len(profiles) > 1 {
			r.Reason += " (skipped under every emulated release: 8.0.4 and 8.2.1)"
		}
		results = append(results, r)
	}

	counts := map[unified.Status]int{}
	var lines []string
	for _, r := range results {
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
	fmt.Printf("conformance: %d passed, %d failed, %d skipped\n", counts[unified.Passed], counts[unified.Failed], counts[unified.Skipped])
	for _, l := range lines {
		fmt.Println(l)
	}
}
