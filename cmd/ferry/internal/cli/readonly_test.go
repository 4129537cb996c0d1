package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// unsetEnv makes sure the variables are not set during the test.
func unsetEnv(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		t.Setenv(n, "") // restored after the test
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadOnlyCommandsNeedOnlyTheirVariables: status, status -json, dlq
// list, position show, reset, verify and the snapshot commands (request,
// status, cancel) run with the webhook's signing
// secret, the member id and the listen port unset in the environment
// (they never use them); run, validate and dlq replay, which use them,
// still refuse, naming each variable; and a read-only command still
// names a variable it needs (state.uri). Before, every command needed
// every ${VAR} of the file.
func TestReadOnlyCommandsNeedOnlyTheirVariables(t *testing.T) {
	srv, client := emulator(t)
	unsetEnv(t, "FERRY_T_SECRET", "FERRY_T_MEMBER", "FERRY_T_PORT", "FERRY_T_STATE")
	yaml := fmt.Sprintf(`
listen: ":${FERRY_T_PORT}"
state: {uri: %q}
streams:
  - name: orders
    source: {uri: %q, scope: {collection: shop.orders}}
    group: {partitions: 2, member_id: "${FERRY_T_MEMBER}"}
    sink: {webhook: {url: "http://127.0.0.1:9/hook", secret: "${FERRY_T_SECRET}"}}
`, srv.URI(), srv.URI())
	cfg := writeFile(t, yaml)
	srv.AdvanceClock(2 * time.Minute) // the oplog holds verify's window
	if _, err := client.Database("shop").Collection("orders").InsertOne(context.Background(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", "-c", cfg},
		{"status", "-c", cfg, "-json"},
		{"dlq", "list", "-c", cfg},
		{"position", "show", "-c", cfg},
		{"reset", "-c", cfg, "-stream", "orders"},
		{"verify", "-c", cfg, "-stream", "orders", "-since", "1m"},
		{"snapshot", "-c", cfg, "-stream", "orders"},
		{"snapshot", "status", "-c", cfg},
		{"snapshot", "cancel", "-c", cfg, "-stream", "orders"},
	} {
		code, out, errOut := runCLI(args...)
		if code != 0 || strings.Contains(errOut, "environment variable") {
			t.Errorf("ferry %s: exit %d:\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	for _, args := range [][]string{
		{"validate", "-c", cfg},
		{"dlq", "replay", "-c", cfg},
		{"run", "-c", cfg},
	} {
		code, _, errOut := runCLI(args...)
		if code != 1 {
			t.Errorf("ferry %s: exit %d, want 1:\n%s", strings.Join(args, " "), code, errOut)
		}
		for _, want := range []string{
			"streams[0].sink.webhook.secret: environment variable FERRY_T_SECRET is not set",
			"streams[0].group.member_id: environment variable FERRY_T_MEMBER is not set",
			"listen: environment variable FERRY_T_PORT is not set",
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("ferry %s does not say %q:\n%s", strings.Join(args, " "), want, errOut)
			}
		}
	}
	needsState := writeFile(t, strings.Replace(yaml, fmt.Sprintf("state: {uri: %q}", srv.URI()), `state: {uri: "${FERRY_T_STATE}"}`, 1))
	code, _, errOut := runCLI("status", "-c", needsState)
	if code != 1 || !strings.Contains(errOut, "state.uri: environment variable FERRY_T_STATE is not set") || strings.Contains(errOut, "FERRY_T_SECRET") {
		t.Errorf("ferry status with state.uri's variable unset: exit %d:\n%s", code, errOut)
	}
}
