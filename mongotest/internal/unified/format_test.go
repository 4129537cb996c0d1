package unified

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/mongotest/internal/specdata"
)

// specDir locates MongoDB's change-stream test files (package specdata).
func specDir(t *testing.T) string {
	t.Helper()
	return filepath.Dir(specdata.Files(t, "change-streams")[0])
}

func TestParseSpecFiles(t *testing.T) {
	dir := specDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	total := 0
	ops := map[string]bool{}
	for _, path := range files {
		f, err := ParseFile(path)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(path), err)
			continue
		}
		if len(f.Tests) == 0 {
			t.Errorf("%s: no tests", filepath.Base(path))
		}
		if err := Check(f); err != nil {
			t.Errorf("%s: %v", filepath.Base(path), err)
		}
		for _, e := range f.CreateEntities {
			if err := parseEntitySpec(e); err != nil {
				t.Errorf("%s: entity %s: %v", filepath.Base(path), e.ID, err)
			}
		}
		for _, test := range f.Tests {
			for _, op := range test.Operations {
				ops[op.Name] = true
			}
		}
		total += len(f.Tests)
	}
	t.Logf("%d files, %d tests, operations %v", len(files), total, keys(ops))
	if len(files) == 10 && total != 92 {
		t.Errorf("expected 92 tests in the 10 change-stream files, parsed %d", total)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

const sampleFile = `{
  "description": "sample",
  "schemaVersion": "1.7",
  "runOnRequirements": [{"minServerVersion": "4.0", "topologies": ["replicaset"], "serverless": "forbid"}],
  "createEntities": [
    {"client": {"id": "client0", "observeEvents": ["commandStartedEvent"], "ignoreCommandMonitoringEvents": ["killCursors"], "useMultipleMongoses": false}},
    {"database": {"id": "db0", "client": "client0", "databaseName": "d"}},
    {"collection": {"id": "coll0", "database": "db0", "collectionName": "c"}}
  ],
  "initialData": [{"collectionName": "c", "databaseName": "d", "documents": [{"_id": 1}]}],
  "tests": [
    {
      "description": "ok",
      "operations": [
        {"name": "createChangeStream", "object": "coll0", "arguments": {"pipeline": []}, "saveResultAsEntity": "cs0"},
        {"name": "insertOne", "object": "coll0", "arguments": {"document": {"x": 1}}},
        {"name": "iterateUntilDocumentOrError", "object": "cs0", "expectResult": {"operationType": "insert"}},
        {"name": "iterateUntilDocumentOrError", "object": "cs0", "expectError": {"errorCode": 280, "errorLabelsContain": ["NonResumableChangeStreamError"]}}
      ],
      "expectEvents": [{"client": "client0", "ignoreExtraEvents": true, "events": [{"commandStartedEvent": {"command": {"aggregate": "c"}, "commandName": "aggregate", "databaseName": "d"}}]}]
    },
    {
      "description": "unknown operation",
      "operations": [{"name": "frobnicate", "object": "coll0"}]
    },
    {
      "description": "unknown field",
      "operations": [],
      "expectLogMessages": []
    },
    {
      "description": "undefined entity",
      "operations": [{"name": "iterateOnce", "object": "cs9"}]
    },
    {
      "description": "cmap events",
      "operations": [],
      "expectEvents": [{"client": "client0", "eventType": "cmap", "events": []}]
    }
  ]
}`

func TestParseAndCheck(t *testing.T) {
	f, err := Parse([]byte(sampleFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tests) != 5 || len(f.CreateEntities) != 3 || len(f.InitialData) != 1 {
		t.Fatalf("parsed %d tests, %d entities, %d initialData", len(f.Tests), len(f.CreateEntities), len(f.InitialData))
	}
	r := f.RunOnRequirements[0]
	if r.MinServerVersion != "4.0" || r.Topologies[0] != "replicaset" || r.Serverless != "forbid" {
		t.Errorf("requirement parsed as %+v", r)
	}
	ok := f.Tests[0]
	if ok.Problem != nil {
		t.Fatalf("test ok: %v", ok.Problem)
	}
	if err := checkTest(f, &ok); err != nil {
		t.Errorf("test ok: %v", err)
	}
	if x := ok.Operations[3].ExpectError; x == nil || x.ErrorCode == nil || *x.ErrorCode != 280 || x.ErrorLabelsContain[0] != "NonResumableChangeStreamError" {
		t.Errorf("expectError parsed as %+v", x)
	}
	if !ok.ExpectEvents[0].IgnoreExtraEvents || ok.ExpectEvents[0].EventType != "command" {
		t.Errorf("expectEvents parsed as %+v", ok.ExpectEvents[0])
	}
	want := map[string]string{
		"unknown operation": "operation frobnicate not supported on a collection entity",
		"unknown field":     "test field expectLogMessages not supported",
		"undefined entity":  `no entity "cs9"`,
		"cmap events":       `eventType "cmap" not supported`,
	}
	for _, test := range f.Tests[1:] {
		err := test.Problem
		if err == nil {
			err = checkTest(f, &test)
		}
		if err == nil || !strings.Contains(err.Error(), want[test.Description]) {
			t.Errorf("%s: expected a problem containing %q, got %v", test.Description, want[test.Description], err)
		}
	}
	if err := Check(f); err == nil {
		t.Error("Check accepted a file with unsupported features")
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		`{"schemaVersion": "2.0", "tests": []}`:             "schemaVersion 2.0 not supported",
		`{"tests": []}`:                                     "schemaVersion is required",
		`{"schemaVersion": "1.0", "tests": [], "extra": 1}`: "field extra not supported",
		`{"schemaVersion": "1.0", "createEntities": [{"client": {}, "database": {}}], "tests": []}`: "exactly one key",
		`{"schemaVersion": "1.0", "runOnRequirements": [{"minServerVersion": "x"}], "tests": []}`:   "bad version string",
		`not json`: "not Extended JSON",
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: expected an error containing %q, got %v", in, want, err)
		}
	}
}

func TestEntitySpecs(t *testing.T) {
	bad := map[string]string{
		`{"client": {"id": "c", "observeEvents": ["poolCreatedEvent"]}}`:      "observeEvents poolCreatedEvent not supported",
		`{"client": {"id": "c", "observeLogMessages": {"command": "debug"}}}`: "field observeLogMessages not supported",
		`{"bucket": {"id": "b", "database": "d"}}`:                            "entity kind bucket (b) not supported",
		`{"client": {"id": "c", "uriOptions": {"x": {"$$placeholder": 1}}}}`:  "$$placeholder not supported",
		`{"collection": {"id": "c", "database": "d"}}`:                        "collectionName is required",
	}
	for in, want := range bad {
		var f *File
		f, err := Parse([]byte(`{"schemaVersion": "1.0", "createEntities": [` + in + `], "tests": []}`))
		if err == nil {
			err = parseEntitySpec(f.CreateEntities[0])
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: expected an error containing %q, got %v", in, want, err)
		}
	}
}

func TestURIWithOptions(t *testing.T) {
	opts := val(t, `{"retryReads": false, "heartbeatFrequencyMS": 500, "appname": "x y", "readPreferenceTags": ["dc:ny", ""]}`).Document()
	got, err := uriWithOptions("mongodb://user:pw@h1:1,h2:2/db?replicaSet=rs0&retryReads=true", opts, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mongodb://user:pw@h1:1/db?", "replicaSet=rs0", "retryReads=false", "heartbeatFrequencyMS=500", "appname=x+y", "readPreferenceTags=dc%3Any&readPreferenceTags="} {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %s", got, want)
		}
	}
	if strings.Contains(got, "retryReads=true") {
		t.Errorf("%s kept the overridden option", got)
	}
	got, err = uriWithOptions("mongodb://127.0.0.1:27017", nil, false)
	if err != nil || got != "mongodb://127.0.0.1:27017" {
		t.Errorf("plain URI became %q, %v", got, err)
	}
	got, _ = uriWithOptions("mongodb://127.0.0.1:27017", val(t, `{"w": 1}`).Document(), false)
	if got != "mongodb://127.0.0.1:27017/?w=1" {
		t.Errorf("got %q", got)
	}
}

func TestRequirements(t *testing.T) {
	s := &serverInfo{version: [3]int{7, 0, 2}, topology: "replicaset"}
	yes, no := true, false
	cases := []struct {
		req  Requirement
		want string
	}{
		{Requirement{MinServerVersion: "3.6", Topologies: []string{"replicaset"}, Serverless: "forbid"}, ""},
		{Requirement{MinServerVersion: "7.0.2"}, ""},
		{Requirement{MinServerVersion: "7.0.3"}, "requires minServerVersion 7.0.3; server is 7.0.2"},
		{Requirement{MaxServerVersion: "4.2.99"}, "requires maxServerVersion 4.2.99; server is 7.0.2"},
		{Requirement{MaxServerVersion: "7.0"}, "requires maxServerVersion 7.0; server is 7.0.2"},
		{Requirement{Topologies: []string{"single"}}, "requires topology single; server is replicaset"},
		{Requirement{Topologies: []string{"sharded", "load-balanced"}}, "requires topology sharded or load-balanced; server is replicaset"},
		{Requirement{Serverless: "require"}, "requires serverless"},
		{Requirement{Auth: &yes}, "requires auth"},
		{Requirement{Auth: &no}, ""},
		{Requirement{CSFLE: &yes}, "requires csfle"},
		{Requirement{CSFLE: &no}, ""},
	}
	for _, c := range cases {
		got := s.unmet(context.Background(), []Requirement{c.req})
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: got %q, want %q", c.req, got, c.want)
		}
	}
	either := []Requirement{{Topologies: []string{"single"}}, {MinServerVersion: "6.0"}}
	if got := s.unmet(context.Background(), either); got != "" {
		t.Errorf("one satisfied requirement of two should do, got %q", got)
	}
	if v, err := parseVersion("4.9.0-alpha4-271-g7d5cf02"); err != nil || v != [3]int{4, 9, 0} {
		t.Errorf("pre-release version parsed as %v, %v", v, err)
	}
	if compareVersions([3]int{4, 0, 10}, [3]int{4, 0, 9}) <= 0 || compareVersions([3]int{3, 6, 0}, [3]int{4, 0, 0}) >= 0 {
		t.Error("versions must compare numerically")
	}
}
