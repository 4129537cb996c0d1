package unified_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/mongotest"
	"github.com/ferry-io/ferry/mongotest/internal/unified"
)

// These tests run small unified-format files through the runner against
// the emulator (or FERRY_TEST_MONGODB_URI) to show that the runner reports
// what differs, and does not pass what it should fail.

const selfTestFile = `{
  "description": "runner self-test",
  "schemaVersion": "1.7",
  "runOnRequirements": [{"minServerVersion": "6.0", "topologies": ["replicaset"]}],
  "createEntities": [
    {"client": {"id": "client0", "observeEvents": ["commandStartedEvent"], "ignoreCommandMonitoringEvents": ["killCursors"], "useMultipleMongoses": false}},
    {"client": {"id": "globalClient", "useMultipleMongoses": false}},
    {"database": {"id": "database0", "client": "client0", "databaseName": "unifiedSelfTest"}},
    {"collection": {"id": "collection0", "database": "database0", "collectionName": "coll0"}},
    {"database": {"id": "globalDatabase0", "client": "globalClient", "databaseName": "unifiedSelfTest"}},
    {"collection": {"id": "globalCollection0", "database": "globalDatabase0", "collectionName": "coll0"}}
  ],
  "initialData": [{"collectionName": "coll0", "databaseName": "unifiedSelfTest", "documents": [{"_id": 1, "a": 1}]}],
  "tests": [
    {
      "description": "passes",
      "operations": [
        {"name": "createChangeStream", "object": "collection0", "arguments": {"pipeline": [], "batchSize": 2}, "saveResultAsEntity": "changeStream0"},
        {"name": "insertOne", "object": "globalCollection0", "arguments": {"document": {"_id": 2, "x": 1}}, "expectResult": {"insertedId": {"$$unsetOrMatches": 2}}},
        {"name": "iterateUntilDocumentOrError", "object": "changeStream0", "saveResultAsEntity": "event0",
         "expectResult": {"_id": {"$$exists": true}, "operationType": "insert", "ns": {"db": "unifiedSelfTest", "coll": "coll0"}, "fullDocument": {"_id": 2, "x": 1}, "clusterTime": {"$$type": "timestamp"}}},
        {"name": "updateOne", "object": "globalCollection0", "arguments": {"filter": {"_id": 2}, "update": {"$set": {"x": 2}}}, "expectResult": {"matchedCount": 1, "modifiedCount": 1, "upsertedCount": 0}}
      ],
      "expectEvents": [{"client": "client0", "ignoreExtraEvents": true, "events": [
        {"commandStartedEvent": {"command": {"aggregate": "coll0", "cursor": {"batchSize": 2}, "pipeline": [{"$changeStream": {}}]}, "commandName": "aggregate", "databaseName": "unifiedSelfTest"}}
      ]}],
      "outcome": [{"collectionName": "coll0", "databaseName": "unifiedSelfTest", "documents": [{"_id": 1, "a": 1}, {"_id": 2, "x": 2}]}]
    },
    {
      "description": "wrong value",
      "operations": [
        {"name": "createChangeStream", "object": "collection0", "arguments": {"pipeline": []}, "saveResultAsEntity": "changeStream0"},
        {"name": "insertOne", "object": "globalCollection0", "arguments": {"document": {"x": 1}}},
        {"name": "iterateUntilDocumentOrError", "object": "changeStream0", "expectResult": {"fullDocument": {"x": 2, "_id": {"$$exists": true}}}}
      ]
    },
    {
      "description": "nested extra field",
      "operations": [
        {"name": "createChangeStream", "object": "collection0", "arguments": {"pipeline": []}, "saveResultAsEntity": "changeStream0"},
        {"name": "insertOne", "object": "globalCollection0", "arguments": {"document": {"x": 1}}},
        {"name": "iterateUntilDocumentOrError", "object": "changeStream0", "expectResult": {"ns": {"db": "unifiedSelfTest"}}}
      ]
    },
    {
      "description": "extra events",
      "operations": [
        {"name": "createChangeStream", "object": "collection0", "arguments": {"pipeline": []}, "saveResultAsEntity": "changeStream0"},
        {"name": "insertOne", "object": "globalCollection0", "arguments": {"document": {"x": 1}}},
        {"name": "iterateUntilDocumentOrError", "object": "changeStream0"}
      ],
      "expectEvents": [{"client": "client0", "events": [
        {"commandStartedEvent": {"command": {"aggregate": "coll0"}}}
      ]}]
    },
    {
      "description": "wrong event",
      "operations": [
        {"name": "createChangeStream", "object": "collection0", "arguments": {"pipeline": [], "comment": "c1"}, "saveResultAsEntity": "changeStream0"}
      ],
      "expectEvents": [{"client": "client0", "events": [
        {"commandStartedEvent": {"command": {"aggregate": "coll0", "comment": "c2"}}}
      ]}]
    },
    {
      "description": "no event arrives",
      "operations": [
        {"name": "createChangeStream", "object": "collection0", "arguments": {"pipeline": []}, "saveResultAsEntity": "changeStream0"},
        {"name": "iterateUntilDocumentOrError", "object": "changeStream0"}
      ]
    },
    {
      "description": "server error code",
      "operations": [
        {"name": "createChangeStream", "object": "collection0", "arguments": {"pipeline": [{"$project": {"_id": 0}}]}, "saveResultAsEntity": "changeStream0"},
        {"name": "insertOne", "object": "globalCollection0", "arguments": {"document": {"x": 1}}},
        {"name": "iterateUntilDocumentOrError", "object": "changeStream0", "expectError": {"errorCode": 280, "isClientError": false}}
      ]
    },
    {
      "description": "wrong error code",
      "operations": [
        {"name": "createChangeStream", "object": "collection0", "arguments": {"pipeline": [{"$project": {"_id": 0}}]}, "saveResultAsEntity": "changeStream0"},
        {"name": "insertOne", "object": "globalCollection0", "arguments": {"document": {"x": 1}}},
        {"name": "iterateUntilDocumentOrError", "object": "changeStream0", "expectError": {"errorCode": 281}}
      ]
    },
    {
      "description": "error expected, none happens",
      "operations": [
        {"name": "insertOne", "object": "collection0", "arguments": {"document": {"x": 1}}, "expectError": {"isError": true}}
      ]
    },
    {
      "description": "unsupported operation",
      "operations": [
        {"name": "createSearchIndex", "object": "collection0", "arguments": {"model": {}}}
      ]
    },
    {
      "description": "unsupported argument",
      "operations": [
        {"name": "insertOne", "object": "collection0", "arguments": {"document": {"x": 1}, "frobnicate": true}}
      ]
    },
    {
      "description": "wrong outcome",
      "operations": [],
      "outcome": [{"collectionName": "coll0", "databaseName": "unifiedSelfTest", "documents": [{"_id": 1, "a": 2}]}]
    },
    {
      "description": "sets a fail point",
      "operations": [
        {"name": "failPoint", "object": "testRunner", "arguments": {"client": "globalClient", "failPoint": {"configureFailPoint": "failCommand", "mode": "alwaysOn", "data": {"failCommands": ["insert"], "errorCode": 2}}}},
        {"name": "insertOne", "object": "collection0", "arguments": {"document": {"x": 1}}, "expectError": {"errorCode": 2}}
      ]
    },
    {
      "description": "fail point is gone",
      "operations": [
        {"name": "insertOne", "object": "collection0", "arguments": {"document": {"x": 1}}}
      ]
    },
    {
      "description": "needs a standalone",
      "runOnRequirements": [{"topologies": ["single"]}],
      "operations": []
    }
  ]
}`

// failing maps each test meant to fail to a piece of its expected reason.
var failing = map[string]string{
	"wrong value":                  "fullDocument.x: expected int 2, got int 1",
	"nested extra field":           "ns.coll: unexpected field",
	"extra events":                 "unexpected extra events",
	"wrong event":                  `command.comment: expected string "c2", got string "c1"`,
	"no event arrives":             "no document within the iteration limit of 300ms",
	"wrong error code":             "expectError.errorCode: expected 281, got [280]",
	"error expected, none happens": "expected an error, got success",
	"unsupported operation":        "operation createSearchIndex not supported on a collection entity",
	"unsupported argument":         "argument frobnicate not supported",
	"wrong outcome":                `outcome unifiedSelfTest.coll0[0]: expected {"_id":1,"a":2}, got {"_id":1,"a":1}`,
}

func testURI(t *testing.T) string {
	if uri := os.Getenv("FERRY_TEST_MONGODB_URI"); uri != "" {
		return uri
	}
	srv := mongotest.NewServer()
	t.Cleanup(srv.Close)
	return srv.URI()
}

func TestRunnerReportsDifferences(t *testing.T) {
	path := filepath.Join(t.TempDir(), "self.json")
	if err := os.WriteFile(path, []byte(selfTestFile), 0o600); err != nil {
		t.Fatal(err)
	}
	expected := map[string]string{}
	for k := range failing {
		expected[k] = "runner self-test"
	}
	results := unified.RunFile(t, path, testURI(t),
		unified.ExpectFailures(expected), unified.WithIterationTimeout(300*time.Millisecond))

	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Test] = true
		want, shouldFail := failing[r.Test]
		switch {
		case r.Test == "needs a standalone":
			if r.Status != unified.Skipped || r.Reason != "requires topology single; server is replicaset" {
				t.Errorf("%s: got %s %q", r.Test, r.Status, r.Reason)
			}
		case shouldFail:
			if r.Status != unified.Failed || !r.Expected || !strings.Contains(r.Reason, want) {
				t.Errorf("%s: expected an expected failure containing %q, got %s (expected=%v) %q", r.Test, want, r.Status, r.Expected, r.Reason)
			}
		default:
			if r.Status != unified.Passed {
				t.Errorf("%s: expected a pass, got %s %q", r.Test, r.Status, r.Reason)
			}
		}
	}
	if len(seen) != 15 {
		t.Errorf("got results for %d tests, want 15", len(seen))
	}
}
