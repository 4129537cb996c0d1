package unified_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/mongotest/internal/unified"
)

// sessionSelfTest exercises the session operations: it must pass where it
// should, fail where a callback operation or a state assertion is wrong
// (withTransaction's own expectError must not absorb that), and skip what
// the Go driver v2 cannot express.
const sessionSelfTest = `{
  "description": "session self-test",
  "schemaVersion": "1.9",
  "runOnRequirements": [{"minServerVersion": "6.0", "topologies": ["replicaset"]}],
  "createEntities": [
    {"client": {"id": "client0", "observeEvents": ["commandStartedEvent"], "useMultipleMongoses": false}},
    {"database": {"id": "database0", "client": "client0", "databaseName": "unifiedSessionTest"}},
    {"collection": {"id": "collection0", "database": "database0", "collectionName": "coll0"}},
    {"session": {"id": "session0", "client": "client0"}},
    {"session": {"id": "snap0", "client": "client0", "sessionOptions": {"snapshot": true}}}
  ],
  "initialData": [{"collectionName": "coll0", "databaseName": "unifiedSessionTest", "documents": [{"_id": 1}]}],
  "tests": [
    {
      "description": "withTransaction commits",
      "operations": [
        {"name": "assertSessionTransactionState", "object": "testRunner", "arguments": {"session": "session0", "state": "none"}},
        {"name": "withTransaction", "object": "session0", "arguments": {"callback": [
          {"name": "insertOne", "object": "collection0", "arguments": {"session": "session0", "document": {"_id": 2}}},
          {"name": "insertOne", "object": "collection0", "arguments": {"session": "session0", "document": {"_id": 1}},
           "expectError": {"errorCode": 11000, "errorLabelsOmit": ["TransientTransactionError"]}}
        ]}, "expectError": {"errorContains": "E11000"}},
        {"name": "assertSessionTransactionState", "object": "testRunner", "arguments": {"session": "session0", "state": "aborted"}},
        {"name": "withTransaction", "object": "session0", "arguments": {"callback": [
          {"name": "insertOne", "object": "collection0", "arguments": {"session": "session0", "document": {"_id": 3}}}
        ]}},
        {"name": "assertSessionTransactionState", "object": "testRunner", "arguments": {"session": "session0", "state": "committed"}},
        {"name": "assertSessionNotDirty", "object": "testRunner", "arguments": {"session": "session0"}},
        {"name": "assertSessionUnpinned", "object": "testRunner", "arguments": {"session": "session0"}}
      ],
      "outcome": [{"collectionName": "coll0", "databaseName": "unifiedSessionTest", "documents": [{"_id": 1}, {"_id": 3}]}]
    },
    {
      "description": "a callback mismatch fails the test",
      "operations": [
        {"name": "withTransaction", "object": "session0", "arguments": {"callback": [
          {"name": "insertOne", "object": "collection0", "arguments": {"session": "session0", "document": {"_id": 2}},
           "expectResult": {"insertedId": 3}}
        ]}, "expectError": {"isError": true}}
      ]
    },
    {
      "description": "wrong transaction state",
      "operations": [
        {"name": "startTransaction", "object": "session0"},
        {"name": "assertSessionTransactionState", "object": "testRunner", "arguments": {"session": "session0", "state": "in_progress"}}
      ]
    },
    {
      "description": "snapshot time",
      "operations": [
        {"name": "find", "object": "collection0", "arguments": {"session": "snap0", "filter": {}}, "expectResult": [{"_id": 1}]},
        {"name": "getSnapshotTime", "object": "snap0", "saveResultAsEntity": "t0"},
        {"name": "insertOne", "object": "collection0", "arguments": {"document": {"_id": 9}}},
        {"name": "createEntities", "object": "testRunner", "arguments": {"entities": [
          {"session": {"id": "snap1", "client": "client0", "sessionOptions": {"snapshot": true, "snapshotTime": "t0"}}}]}},
        {"name": "find", "object": "collection0", "arguments": {"session": "snap1", "filter": {}}, "expectResult": [{"_id": 1}]}
      ]
    },
    {
      "description": "wtimeoutMS",
      "operations": [
        {"name": "startTransaction", "object": "session0", "arguments": {"writeConcern": {"w": 1, "wtimeoutMS": 10}}}
      ]
    }
  ]
}`

func TestSessionOperations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.json")
	if err := os.WriteFile(path, []byte(sessionSelfTest), 0o600); err != nil {
		t.Fatal(err)
	}
	failing := map[string]string{
		"a callback mismatch fails the test": "callback: callback[0] collection0.insertOne: result: insertedId",
		"wrong transaction state":            "session transaction state: expected in_progress, got starting",
	}
	expected := map[string]string{}
	for k := range failing {
		expected[k] = "session self-test"
	}
	results := unified.RunFile(t, path, testURI(t), unified.ExpectFailures(expected))
	if len(results) != 5 {
		t.Fatalf("got %d results, want 5", len(results))
	}
	for _, r := range results {
		want, shouldFail := failing[r.Test]
		switch {
		case r.Test == "wtimeoutMS":
			if r.Status != unified.Skipped || !strings.HasPrefix(r.Reason, "the Go driver v2 has no wtimeoutMS") {
				t.Errorf("%s: got %s %q, want a skip naming the driver's limitation", r.Test, r.Status, r.Reason)
			}
		case shouldFail:
			if r.Status != unified.Failed || !strings.Contains(r.Reason, want) {
				t.Errorf("%s: got %s %q, want a failure containing %q", r.Test, r.Status, r.Reason, want)
			}
		default:
			if r.Status != unified.Passed {
				t.Errorf("%s: got %s %q, want a pass", r.Test, r.Status, r.Reason)
			}
		}
	}
}
