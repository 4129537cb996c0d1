// Package specdata locates MongoDB's unified spec tests, the test data the
// emulator's conformance is judged by. They are not part of this
// repository (their licence differs from ours): they live in
// ../shared/mongo-spec beside the project, one folder per specification,
// or wherever FERRY_MONGO_SPEC_DIR names.
//
// A fresh clone has no such folder, so the tests that read it skip with one
// line saying where to put it; with FERRY_REQUIRE_SPEC=1 (CI sets it) the
// same tests fail instead, so the data's absence cannot pass unnoticed.
package specdata

import (
	"os"
	"path/filepath"
	"testing"
)

// Root is the folder of the specifications' folders: FERRY_MONGO_SPEC_DIR
// when set, else ../shared/mongo-spec beside the project (the folder of the
// go.work file above the working directory). It is "" when neither is
// found.
func Root() string {
	if dir := os.Getenv("FERRY_MONGO_SPEC_DIR"); dir != "" {
		return dir
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(filepath.Dir(dir), "shared", "mongo-spec")
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// Required reports whether missing spec data fails the tests
// (FERRY_REQUIRE_SPEC=1) instead of skipping them.
func Required() bool { return os.Getenv("FERRY_REQUIRE_SPEC") == "1" }

// Files returns the JSON files of specification suite (a folder of Root,
// such as "change-streams"); "" names Root itself and every suite's
// files. With none, the test skips (fails if Required) saying where the
// files go.
func Files(t testing.TB, suite string) []string {
	t.Helper()
	root := Root()
	var files []string
	if root != "" {
		if suite == "" {
			files, _ = filepath.Glob(filepath.Join(root, "*", "*.json"))
		} else {
			files, _ = filepath.Glob(filepath.Join(root, suite, "*.json"))
		}
	}
	if len(files) == 0 {
		Missing(t, suite)
	}
	return files
}

// Missing skips the test, or fails it if Required, with one line saying
// where suite's files go.
func Missing(t testing.TB, suite string) {
	t.Helper()
	where := Root()
	if where == "" {
		where = "../shared/mongo-spec (beside the project)"
	}
	if suite != "" {
		where = filepath.Join(where, suite)
	}
	msg := "no MongoDB spec test files in " + where + ": put MongoDB's unified tests (one folder per specification) in ../shared/mongo-spec beside the project, or set FERRY_MONGO_SPEC_DIR to their folder"
	if Required() {
		t.Fatal(msg + " (FERRY_REQUIRE_SPEC=1: they are required here)")
		return
	}
	t.Skip(msg)
}
