package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// withUnsetVars refers to variables that are not set in the sink, the
// member id and the listen address, and in nothing else.
const withUnsetVars = `
listen: ":${PORT}"
state: {uri: "mongodb://127.0.0.1:27017/?replicaSet=rs0"}
streams:
  - name: orders
    source: {uri: "mongodb://127.0.0.1:27017/?replicaSet=rs0", scope: {collection: shop.orders}}
    group: {partitions: 2, member_id: "${MEMBER}"}
    sink:
      webhook:
        url: "https://hooks.example.com/${HOOK_PATH}"
        secret: ${WEBHOOK_SECRET}
        headers: {Authorization: "Bearer ${HOOK_TOKEN}"}
  - name: audit
    source: {uri: "mongodb://127.0.0.1:27017/?replicaSet=rs0", scope: {collection: shop.audit}}
    sink: {kafka: {brokers: ["${KAFKA_BROKER}"], topic: "${TOPIC}", sasl: {mechanism: plain, user: u, password: "${KAFKA_PASSWORD}"}}}
`

// noEnv sets no variable.
func noEnv(string) (string, bool) { return "", false }

// TestUnusedPartsNeedNoVariables: without options every unset variable is
// a problem naming it; with Unused, those under the named parts are not
// (nor what they leave empty, such as a required secret), the rest of the
// file is decoded and checked as usual, and an unset variable outside them
// is still an error naming it.
func TestUnusedPartsNeedNoVariables(t *testing.T) {
	_, err := config.Parse([]byte(withUnsetVars), noEnv)
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("strict Parse = %v, want an *Error", err)
	}
	for _, name := range []string{"PORT", "MEMBER", "HOOK_PATH", "WEBHOOK_SECRET", "HOOK_TOKEN", "KAFKA_BROKER", "TOPIC", "KAFKA_PASSWORD"} {
		if !strings.Contains(err.Error(), "environment variable "+name+" is not set") {
			t.Errorf("strict Parse does not name %s:\n%v", name, err)
		}
	}

	unused := config.Unused("listen", "streams[].group.member_id", "streams[].sink")
	cfg, err := config.Parse([]byte(withUnsetVars), noEnv, unused)
	if err != nil {
		t.Fatalf("Parse with the sinks, member id and listen unused: %v", err)
	}
	if len(cfg.Streams) != 2 || cfg.Streams[0].Group.Partitions != 2 || cfg.Streams[0].Sink.Type != "webhook" ||
		cfg.Streams[1].Sink.Type != "kafka" || cfg.Streams[0].Source.Scope.Collection != "orders" {
		t.Fatalf("decoded %+v", cfg.Streams)
	}

	// Only the parts named: a variable the command reads is required.
	needsURI := strings.Replace(withUnsetVars, `state: {uri: "mongodb://127.0.0.1:27017/?replicaSet=rs0"}`, `state: {uri: "${STATE_URI}"}`, 1)
	_, err = config.Parse([]byte(needsURI), noEnv, unused)
	if err == nil || !strings.Contains(err.Error(), "state.uri: environment variable STATE_URI is not set") ||
		strings.Contains(err.Error(), "WEBHOOK_SECRET") {
		t.Fatalf("Parse with state.uri unset = %v; want only state.uri's variable named", err)
	}
	// Other problems in an unused part are still reported.
	bad := strings.Replace(withUnsetVars, `topic: "${TOPIC}"`, `topic: "${TOPIC}", nope: 1`, 1)
	if _, err := config.Parse([]byte(bad), noEnv, unused); err == nil || !strings.Contains(err.Error(), "streams[1].sink.kafka.nope: unknown key") {
		t.Fatalf("Parse with an unknown key in an unused part = %v", err)
	}
	// One stream's sink only.
	_, err = config.Parse([]byte(withUnsetVars), noEnv, config.Unused("listen", "streams[].group.member_id", "streams[0].sink"))
	if err == nil || strings.Contains(err.Error(), "WEBHOOK_SECRET") || !strings.Contains(err.Error(), "KAFKA_PASSWORD") {
		t.Fatalf("Parse with streams[0].sink unused = %v; want streams[1]'s variables named, not streams[0]'s", err)
	}
}
