package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// minimal is the smallest valid configuration; bad cases edit it.
const minimal = `
streams:
  - name: orders
    source:
      uri: mongodb://ferry:${DB_PASSWORD}@db1:27017,db2:27017/?replicaSet=rs0
      scope:
        collection: shop.orders
    sink:
      webhook:
        url: https://hooks.example.com/ferry
        secret: ${HOOK_SECRET}
`

// Secret values the tests put in the environment; no error may contain them.
const (
	dbPassword = "pa55-w0rd-db"
	hookSecret = "whsec_aG9vay1zZWNyZXQtdmFsdWUtZnJvbS10aGUtZW52ISE=" // a valid signing secret
	// hookSecretInFile is written in the file itself by some tests.
	hookSecretInFile = "whsec_aG9vay1zZWNyZXQtaW4tZmlsZS1mb3ItcmVkYWN0ISE="
)

func testEnv(extra map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := extra[name]; ok {
			return v, true
		}
		switch name {
		case "DB_PASSWORD":
			return dbPassword, true
		case "HOOK_SECRET":
			return hookSecret, true
		}
		return "", false
	}
}

func edit(old, new string) string {
	if !strings.Contains(minimal, old) {
		panic("test edit does not apply: " + old)
	}
	return strings.Replace(minimal, old, new, 1)
}

func problems(t *testing.T, err error) []config.Problem {
	t.Helper()
	var e *config.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	return e.Problems
}

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		name, yaml string
		path, msg  string // one problem must have this exact path and contain msg
	}{
		{"empty", "", "", "empty"},
		{"only a comment", "# nothing\n", "", "empty"},
		{"garbage", "{{{ not: yaml", "", "not valid YAML"},
		{"tab indentation", "streams:\n\t- name: x\n", "", "not valid YAML"},
		{"two documents", minimal + "---\nlisten: :1\n", "", "exactly one YAML document"},
		{"root is a list", "- a\n- b\n", "", "must be a mapping"},
		{"no streams", "listen: \":8080\"\n", "streams", "is required"},
		{"streams empty", "streams: []\n", "streams", "at least one stream"},
		{"streams not a list", "streams: {name: x}\n", "streams", "must be a list"},
		{"unknown top-level key", "listn: :80\n" + minimal, "listn", "unknown key"},
		{"unknown stream key", edit("    source:", "    sorce: 1\n    source:"), "streams[0].sorce", "unknown key"},
		{"unknown source key", edit("      scope:", "      fulldocument: x\n      scope:"), "streams[0].source.fulldocument", "unknown key"},
		{"unknown webhook key", edit("        secret:", "        secrett: x\n        secret:"), "streams[0].sink.webhook.secrett", "unknown key"},
		{"unknown log key", "log: {lvl: info}\n" + minimal, "log.lvl", "unknown key"},
		{"missing name", edit("  - name: orders\n    source:", "  - source:"), "streams[0].name", "is required"},
		{"bad name", edit("name: orders", "name: \"or ders\""), "streams[0].name", "letters, digits"},
		{"missing source", edit("    source:\n      uri", "    src:\n      uri"), "streams[0].src", "unknown key"},
		{"missing uri", edit("      uri: mongodb://ferry:${DB_PASSWORD}@db1:27017,db2:27017/?replicaSet=rs0\n", ""), "streams[0].source.uri", "is required"},
		{"http uri", edit("mongodb://ferry:${DB_PASSWORD}@db1", "http://ferry:${DB_PASSWORD}@db1"), "streams[0].source.uri", "mongodb:// or mongodb+srv://"},
		{"srv with port", edit("mongodb://ferry:${DB_PASSWORD}@db1:27017,db2:27017/", "mongodb+srv://ferry:${DB_PASSWORD}@db1.example.com:27017/"), "streams[0].source.uri", "no port"},
		{"uri bad port", edit("db2:27017", "db2:99999"), "streams[0].source.uri", "port"},
		{"uri no host", edit("@db1:27017,db2:27017/", "@/"), "streams[0].source.uri", "no host"},
		{"state uri bad", "state: {uri: \"postgres://u:" + "${DB_PASSWORD}@x/db\"}\n" + minimal, "state.uri", "mongodb://"},
		{"state bolt and uri", "state: {uri: \"mongodb://x\", bolt: {path: a.db}}\n" + minimal, "state", "not both"},
		{"bolt without path", "state: {bolt: {}}\n" + minimal, "state.bolt.path", "is required"},
		{"bad webhook url", edit("https://hooks.example.com/ferry", "hooks.example.com/ferry"), "streams[0].sink.webhook.url", "must be an absolute http(s) URL"},
		{"ftp webhook url", edit("https://hooks.example.com/ferry", "ftp://hooks.example.com/ferry"), "streams[0].sink.webhook.url", "must be an absolute http(s) URL"},
		{"missing webhook url", edit("        url: https://hooks.example.com/ferry\n", ""), "streams[0].sink.webhook.url", "is required"},
		{"missing secret", edit("        secret: ${HOOK_SECRET}\n", ""), "streams[0].sink.webhook.secret", "is required"},
		{"negative webhook timeout", edit("        secret:", "        timeout: -5s\n        secret:"), "streams[0].sink.webhook.timeout", "must be positive"},
		{"zero handler timeout", edit("    sink:", "    retry: {handler_timeout: 0s}\n    sink:"), "streams[0].retry.handler_timeout", "must be positive"},
		{"duration without unit", edit("    sink:", "    retry: {initial_backoff: 100}\n    sink:"), "streams[0].retry.initial_backoff", "must be a duration"},
		{"max below initial backoff", edit("    sink:", "    retry: {initial_backoff: 2s, max_backoff: 1s}\n    sink:"), "streams[0].retry.max_backoff", "initial_backoff"},
		{"zero attempts", edit("    sink:", "    retry: {max_attempts: 0}\n    sink:"), "streams[0].retry.max_attempts", "must be at least 1, got 0"},
		{"partitions zero", edit("    sink:", "    group: {partitions: 0}\n    sink:"), "streams[0].group.partitions", "between 1 and"},
		{"partitions mistyped", edit("    sink:", "    group: {partitions: four}\n    sink:"), "streams[0].group.partitions", "whole number"},
		{"partitions a list", edit("    sink:", "    group: {partitions: [1]}\n    sink:"), "streams[0].group.partitions", "single value"},
		{"unknown partitioning", edit("    sink:", "    group: {partitioning: mod}\n    sink:"), "streams[0].group.partitioning", "must be one of hash-range, hash-mod, got \"mod\""},
		{"negative lease ttl", edit("    sink:", "    group: {lease_ttl: -10s}\n    sink:"), "streams[0].group.lease_ttl", "at least 100ms"},
		{"tiny lease ttl", edit("    sink:", "    group: {lease_ttl: 1ms}\n    sink:"), "streams[0].group.lease_ttl", "at least 100ms"},
		{"group not a mapping", edit("    sink:", "    group: 3\n    sink:"), "streams[0].group", "must be a mapping"},
		{"unknown sink", edit("      webhook:", "      rabbitmq: {}\n      webhook:"), "streams[0].sink.rabbitmq", "known types: kafka, mongodb, nats, pubsub, stdout, webhook"},
		{"two sinks", edit("    sink:\n", "    sink:\n      stdout: {}\n"), "streams[0].sink", "exactly one sink type, got stdout and webhook"},
		{"no sink", strings.SplitN(minimal, "    sink:", 2)[0], "streams[0].sink", "is required"},
		{"empty sink", strings.SplitN(minimal, "    sink:", 2)[0] + "    sink: {}\n", "streams[0].sink", "choose one sink type"},
		{"two scopes", edit("        collection: shop.orders", "        collection: shop.orders\n        database: shop"), "streams[0].source.scope", "exactly one of collection, database, cluster"},
		{"no scope", edit("        collection: shop.orders", "        {}"), "streams[0].source.scope", "set one of"},
		{"missing scope", edit("      scope:\n        collection: shop.orders\n", ""), "streams[0].source.scope", "is required"},
		{"cluster false", edit("        collection: shop.orders", "        cluster: false"), "streams[0].source.scope.cluster", "must be true"},
		{"collection without db", edit("collection: shop.orders", "collection: orders"), "streams[0].source.scope.collection", "database.collection"},
		{"duplicate names", minimal + strings.SplitN(minimal, "streams:\n", 2)[1], "streams[1].name", "already the name of streams[0]"},
		{"bad start_at", edit("      scope:", "      start_at: yesterday\n      scope:"), "streams[0].source.start_at", "now, backfill, an RFC 3339 time"},
		{"start_at checkpoints_of itself", edit("      scope:", "      start_at: {checkpoints_of: orders}\n      scope:"), "streams[0].source.start_at.checkpoints_of", "names this stream itself"},
		{"start_at checkpoints_of empty", edit("      scope:", "      start_at: {checkpoints_of: \"\"}\n      scope:"), "streams[0].source.start_at.checkpoints_of", "must name the stream"},
		{"start_at unknown key", edit("      scope:", "      start_at: {stream: orders}\n      scope:"), "streams[0].source.start_at.stream", ""},
		{"max_elapsed too short", edit("    sink:", "    retry: {max_elapsed: 10ms}\n    sink:"), "streams[0].retry.max_elapsed", "at least 1s"},
		{"unknown mode", edit("    sink:", "    delivery: {mode: exactly-once}\n    sink:"), "streams[0].delivery.mode", "at-least-once, idempotent, transactional"},
		{"transactional webhook", edit("    sink:", "    delivery: {mode: transactional}\n    sink:"), "streams[0].delivery.mode", "transactional needs a sink"},
		{"unknown poison policy", edit("    sink:", "    on_poison: ignore\n    sink:"), "streams[0].on_poison", "dead-letter, stall"},
		{"unknown history policy", edit("    sink:", "    on_history_lost: now\n    sink:"), "streams[0].on_history_lost", "fail, backfill"},
		{"unknown invalidate policy", edit("    sink:", "    on_invalidate: ignore\n    sink:"), "streams[0].on_invalidate", "stop, restart"},
		{"bolt with idempotent", "state: {bolt: {path: a.db}}\n" + edit("    sink:", "    delivery: {mode: idempotent}\n    on_poison: stall\n    sink:"), "streams[0].delivery.mode", "state.bolt supports at-least-once only"},
		{"bolt with dead-letter", "state: {bolt: {path: a.db}}\n" + minimal, "streams[0].on_poison", "with state.bolt set on_poison: stall"},
		{"bad full_document", edit("      scope:", "      full_document: always\n      scope:"), "streams[0].source.full_document", "updateLookup"},
		{"mistyped show_expanded_events", edit("      scope:", "      show_expanded_events: maybe\n      scope:"), "streams[0].source.show_expanded_events", "true or false"},
		{"pipeline not a list", edit("      scope:", "      pipeline: {$match: {}}\n      scope:"), "streams[0].source.pipeline", "list of stages"},
		{"pipeline stage two keys", edit("      scope:", "      pipeline:\n        - {$match: {}, $project: {a: 1}}\n      scope:"), "streams[0].source.pipeline[0]", "exactly one key"},
		{"pipeline stage no operator", edit("      scope:", "      pipeline:\n        - {match: {}}\n      scope:"), "streams[0].source.pipeline[0]", "operator"},
		{"missing env", edit("${HOOK_SECRET}", "${NOPE_NOT_SET}"), "streams[0].sink.webhook.secret", "environment variable NOPE_NOT_SET is not set"},
		{"bad env reference", edit("${HOOK_SECRET}", "${1BAD}"), "streams[0].sink.webhook.secret", "not a valid environment variable reference"},
		{"unterminated env", edit("${HOOK_SECRET}", "${HOOK_SECRET"), "streams[0].sink.webhook.secret", "unterminated"},
		{"bad queue bytes", edit("    sink:", "    queue: {bytes: 12XB}\n    sink:"), "streams[0].queue.bytes", "byte size"},
		{"zero queue events", edit("    sink:", "    queue: {events: 0}\n    sink:"), "streams[0].queue.events", "must be at least 1"},
		{"zero batch events", edit("    sink:", "    batch: {events: 0}\n    sink:"), "streams[0].batch.events", "must be at least 1"},
		{"batch above the queue", edit("    sink:", "    queue: {events: 50}\n    batch: {events: 60}\n    sink:"), "streams[0].batch.events", "must not exceed queue.events (50), got 60"},
		{"bad batch bytes", edit("    sink:", "    batch: {bytes: lots}\n    sink:"), "streams[0].batch.bytes", "byte size"},
		{"negative batch linger", edit("    sink:", "    batch: {linger: -1ms}\n    sink:"), "streams[0].batch.linger", "must be at least 0s"},
		{"long batch linger", edit("    sink:", "    batch: {linger: 1m}\n    sink:"), "streams[0].batch.linger", "must be at most 10s"},
		{"unknown batch key", edit("    sink:", "    batch: {size: 10}\n    sink:"), "streams[0].batch.size", "unknown key (known keys: bytes, events, linger)"},
		{"zero snapshot chunk", edit("    sink:", "    snapshot: {chunk_size: 0}\n    sink:"), "streams[0].snapshot.chunk_size", "must be between 1 and 1000000, got 0"},
		{"huge snapshot chunk", edit("    sink:", "    snapshot: {chunk_size: 2000000}\n    sink:"), "streams[0].snapshot.chunk_size", "must be between 1 and 1000000, got 2000000"},
		{"snapshot chunk not a number", edit("    sink:", "    snapshot: {chunk_size: lots}\n    sink:"), "streams[0].snapshot.chunk_size", "must be a whole number"},
		{"negative snapshot rate", edit("    sink:", "    snapshot: {max_rate: -5}\n    sink:"), "streams[0].snapshot.max_rate", "must be 0 (no cap) or a positive number of documents per second"},
		{"snapshot rate with a unit", edit("    sink:", "    snapshot: {max_rate: 500/s}\n    sink:"), "streams[0].snapshot.max_rate", "must be a number of documents per second such as 500 or 12.5 (0: no cap), got \"500/s\""},
		{"snapshot rate NaN", edit("    sink:", "    snapshot: {max_rate: .nan}\n    sink:"), "streams[0].snapshot.max_rate", "must be a number of documents per second"},
		{"fast snapshot poll", edit("    sink:", "    snapshot: {poll_interval: 10ms}\n    sink:"), "streams[0].snapshot.poll_interval", "must be at least 100ms"},
		{"snapshot poll not a duration", edit("    sink:", "    snapshot: {poll_interval: 2}\n    sink:"), "streams[0].snapshot.poll_interval", "must be a duration"},
		{"unknown snapshot key", edit("    sink:", "    snapshot: {rate: 10}\n    sink:"), "streams[0].snapshot.rate", "unknown key (known keys: chunk_size, max_rate, poll_interval)"},
		{"snapshot not a mapping", edit("    sink:", "    snapshot: fast\n    sink:"), "streams[0].snapshot", "must be a mapping"},
		{"bad listen", "listen: localhost\n" + minimal, "listen", "host:port"},
		{"drain past the grace period", "shutdown: {drain_timeout: 9s}\n" + minimal, "shutdown.drain_timeout", "must fit in shutdown.grace_period (10s"},
		{"drain past a longer grace period", "shutdown: {drain_timeout: 29s, grace_period: 30s}\n" + minimal, "shutdown.drain_timeout", "set drain_timeout to at most 28s"},
		{"drain not a duration", "shutdown: {drain_timeout: soon}\n" + minimal, "shutdown.drain_timeout", "must be a duration"},
		{"drain zero", "shutdown: {drain_timeout: 0s}\n" + minimal, "shutdown.drain_timeout", "must be positive"},
		{"grace under a second", "shutdown: {grace_period: 500ms}\n" + minimal, "shutdown.grace_period", "at least 1s"},
		{"unknown shutdown key", "shutdown: {drain: 5s}\n" + minimal, "shutdown.drain", "unknown key"},
		{"bad log level", "log: {level: loud}\n" + minimal, "log.level", "debug, info, warn, error"},
		{"reserved header", edit("        secret:", "        headers: {Webhook-Signature: x}\n        secret:"), "streams[0].sink.webhook.headers.Webhook-Signature", "cannot be overridden"},
		{"reserved header Ferry-Epoch", edit("        secret:", "        headers: {ferry-epoch: \"1\"}\n        secret:"), "streams[0].sink.webhook.headers.ferry-epoch", "is set by the webhook sink and cannot be overridden"},
		{"header value control character", edit("        secret:", "        headers: {X-Team: \"a\\x01b\"}\n        secret:"), "streams[0].sink.webhook.headers.X-Team", "control characters"},
		{"secret without whsec_", edit("${HOOK_SECRET}", "notawhsec"), "streams[0].sink.webhook.secret", `does not start with "whsec_": the secret must be "whsec_" followed by the base64 of 24 to 64 random bytes`},
		{"secret not base64", edit("${HOOK_SECRET}", "whsec_not*base64"), "streams[0].sink.webhook.secret", `the part after "whsec_" is not valid base64`},
		{"secret too short", edit("${HOOK_SECRET}", "whsec_c2VjcmV0LXNpZ25pbmcta2V5"), "streams[0].sink.webhook.secret", "encodes 18 bytes"},
		{"nats subject placeholder", strings.SplitN(minimal, "    sink:", 2)[0] + "    sink: {nats: {url: \"nats://nats-1:4222\", subject: \"ferry.{foo}.>\"}}\n", "streams[0].sink.nats.subject", "is not a valid subject template: unknown placeholder {foo} (want {db}, {coll} or {op})"},
		{"nats url with a path", strings.SplitN(minimal, "    sink:", 2)[0] + "    sink: {nats: {url: \"nats://u:1/${DB_PASSWORD}@nats-1:4222\"}}\n", "streams[0].sink.nats.url", "a server URL has no path"},
		{"mongodb sink whenAvailable", strings.SplitN(edit("      scope:", "      full_document: whenAvailable\n      scope:"), "    sink:", 2)[0] + "    sink: {mongodb: {database: rm, collection: orders}}\n", "streams[0].source.full_document", "whenAvailable cannot be used with the mongodb sink"},
		{"bad header name", edit("        secret:", "        headers: {\"bad header\": x}\n        secret:"), "streams[0].sink.webhook.headers.bad header", "not a valid HTTP header name"},
		{"bad stdout encoding", strings.SplitN(minimal, "    sink:", 2)[0] + "    sink: {stdout: {encoding: pretty}}\n", "streams[0].sink.stdout.encoding", "canonical, relaxed"},
		{"stream is a string", "streams: [orders]\n", "streams[0]", "must be a mapping"},
		{"different sources without state", minimal +
			"  - name: other\n    source: {uri: \"mongodb://elsewhere\", scope: {database: x}}\n    sink: {stdout: {}}\n", "state.uri", "different source URIs"},
		{"duplicate key", edit("    source:", "    name: again\n    source:"), "streams[0].name", "defined twice"},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.yaml), testEnv(nil))
			if err == nil {
				t.Fatalf("no error; parsed %s", cfg.Redacted())
			}
			checkNoSecrets(t, err.Error())
			found := false
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("want a problem at %q containing %q; got:\n%v", tc.path, tc.msg, err)
			}
			if tc.path != "" && !strings.Contains(err.Error(), tc.path+": ") {
				t.Errorf("error text does not name the path %q: %v", tc.path, err)
			}
		})
	}
}

func checkNoSecrets(t *testing.T, s string) {
	t.Helper()
	for _, secret := range []string{dbPassword, hookSecret, "db-secret-in-file", hookSecretInFile} {
		// The key alone (without "whsec_") must not show either.
		if strings.Contains(s, strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("output contains the secret %q:\n%s", secret, s)
		}
	}
}

// TestAllProblemsReported checks that problems are collected, not just the
// first one.
func TestAllProblemsReported(t *testing.T) {
	y := `
listen: nope
streams:
  - name: a
    source: {uri: "http://x", scope: {}}
    group: {partitions: 0, lease_ttl: -1s}
    sink: {rabbitmq: {}}
  - name: a
    source: {uri: "mongodb://x", scope: {database: d}}
    sink: {stdout: {encoding: pretty}}
`
	_, err := config.Parse([]byte(y), nil)
	want := []string{
		"listen", "streams[0].source.uri", "streams[0].source.scope", "streams[0].group.partitions",
		"streams[0].group.lease_ttl", "streams[0].sink.rabbitmq", "streams[1].name", "streams[1].sink.stdout.encoding",
	}
	got := map[string]bool{}
	for _, p := range problems(t, err) {
		got[p.Path] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no problem reported at %s; got:\n%v", w, err)
		}
	}
	if !strings.Contains(err.Error(), "problems:") {
		t.Errorf("error text %q does not announce several problems", err)
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	_, err := config.Load(missing)
	if err == nil || !strings.Contains(err.Error(), missing+": cannot read the file") {
		t.Errorf("missing file: %v", err)
	}
	unreadable := filepath.Join(dir, "unreadable.yaml")
	if err := os.WriteFile(unreadable, []byte(minimal), 0o000); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(unreadable); err == nil {
		f.Close()
		t.Log("running as a user who can read mode-000 files; skipping the permission case")
	} else if _, err := config.Load(unreadable); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("unreadable file: %v", err)
	}
	if _, err := config.Load(dir); err == nil || !strings.Contains(err.Error(), "cannot read the file") {
		t.Errorf("directory: %v", err)
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(empty)
	if err == nil || err.Error() != empty+": the configuration is empty" {
		t.Errorf("empty file: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(edit("    sink:", "    group: {partitions: 0}\n    sink:")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DB_PASSWORD", dbPassword)
	t.Setenv("HOOK_SECRET", hookSecret)
	_, err = config.Load(bad)
	if err == nil || err.Error() != bad+": streams[0].group.partitions: must be between 1 and 1048576, got 0" {
		t.Errorf("bad file: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.yaml")
	if err := os.WriteFile(garbage, []byte("\x00\x01 ]]] :"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(garbage); err == nil || !strings.HasPrefix(err.Error(), garbage+": ") {
		t.Errorf("garbage file: %v", err)
	}
}
