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

	uri := os.Getenv("FERRY_TEST_MONGODB_URI")
	if uri == "" {
		srv := mongotest.NewServer()
		defer srv.Close()
		uri = srv.URI()
	}

	var results []unified.Result
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			results = append(results, unified.RunFile(t, path, uri, unified.ExpectFailures(knownFailures))...)
		})
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
