package specdata

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skip and Fatal instead of ending
// the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                  {}
func (r *recorder) Skip(args ...any)         { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any)        { r.failed = fmt.Sprint(args...) }
func (r *recorder) Skipf(f string, a ...any) { r.skipped = fmt.Sprintf(f, a...) }

// TestMissingSkipsOrFails: a clone without the spec data skips with one
// line saying where the files go; with FERRY_REQUIRE_SPEC=1 (CI) it fails.
func TestMissingSkipsOrFails(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("FERRY_MONGO_SPEC_DIR", empty)

	t.Setenv("FERRY_REQUIRE_SPEC", "")
	r := &recorder{TB: t}
	if files := Files(r, "change-streams"); files != nil || r.failed != "" {
		t.Fatalf("without the data: files %v, failed %q; want none, not failed", files, r.failed)
	}
	want := filepath.Join(empty, "change-streams")
	if !strings.Contains(r.skipped, want) || !strings.Contains(r.skipped, "FERRY_MONGO_SPEC_DIR") || strings.Contains(r.skipped, "\n") {
		t.Fatalf("skip line %q: want one line naming %s and FERRY_MONGO_SPEC_DIR", r.skipped, want)
	}

	t.Setenv("FERRY_REQUIRE_SPEC", "1")
	r = &recorder{TB: t}
	Files(r, "change-streams")
	if r.skipped != "" || !strings.Contains(r.failed, want) || !strings.Contains(r.failed, "FERRY_REQUIRE_SPEC=1") {
		t.Fatalf("required: skipped %q, failed %q; want a failure naming %s", r.skipped, r.failed, want)
	}
}

// TestFilesFound: a suite's files, and with "" every suite's.
func TestFilesFound(t *testing.T) {
	root := t.TempDir()
	t.Setenv("FERRY_MONGO_SPEC_DIR", root)
	t.Setenv("FERRY_REQUIRE_SPEC", "1")
	for _, p := range []string{"a/x.json", "a/y.json", "b/z.json", "b/notes.txt"} {
		path := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &recorder{TB: t}
	if got := Files(r, "a"); len(got) != 2 || r.failed != "" {
		t.Fatalf("suite a: %v (failed %q), want x.json and y.json", got, r.failed)
	}
	if got := Files(r, ""); len(got) != 3 || r.failed != "" {
		t.Fatalf("every suite: %v (failed %q), want 3 files", got, r.failed)
	}
}

// TestRootBesideTheProject: without FERRY_MONGO_SPEC_DIR the data is
// looked for beside the folder of go.work, from any package's folder.
func TestRootBesideTheProject(t *testing.T) {
	t.Setenv("FERRY_MONGO_SPEC_DIR", "")
	got := Root()
	wd, _ := os.Getwd()
	// This package is mongotest/internal/specdata: four levels below the
	// project's parent.
	want := filepath.Join(wd, "..", "..", "..", "..", "shared", "mongo-spec")
	if filepath.Clean(got) != filepath.Clean(want) {
		t.Fatalf("Root() = %s, want %s", got, filepath.Clean(want))
	}
}
