package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// FuzzParse checks that no input makes Parse panic, that it returns either
// a configuration or an *Error with at least one problem, and that a
// parsed configuration can be redacted and mapped to options.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(full))
	f.Add([]byte("a: &x [*x, *x]\nb: *x\n"))
	f.Add([]byte("streams:\n  - <<: {name: a}\n    source: {uri: 'mongodb://h', scope: {cluster: true}}\n    sink: {stdout: }\n"))
	f.Add([]byte("streams: [{source: {pipeline: [{$match: {a: [[[[[[1]]]]]]}}]}}]"))
	if examples, _ := filepath.Glob("../../../examples/*.yaml"); len(examples) > 0 {
		for _, e := range examples {
			if b, err := os.ReadFile(e); err == nil {
				f.Add(b)
			}
		}
	}
	env := testEnv(map[string]string{"TENANT": "acme", "FERRY_SOURCE_URI": "mongodb://u:p@h", "FERRY_WEBHOOK_SECRET": "whsec_ZnV6ei13ZWJob29rLXNpZ25pbmcta2V5LTAwMDAwMQ==",
		"FERRY_KAFKA_USER": "u", "FERRY_KAFKA_PASSWORD": "p"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data, env)
		if err != nil {
			if len(problems(t, err)) == 0 {
				t.Fatal("an *Error without problems")
			}
			if strings.Contains(err.Error(), dbPassword) || strings.Contains(err.Error(), hookSecret) {
				t.Fatalf("error leaks a secret from the environment: %v", err)
			}
			return
		}
		if cfg == nil || len(cfg.Streams) == 0 {
			t.Fatal("nil config or no streams without an error")
		}
		_ = cfg.Redacted()
		for i := range cfg.Streams {
			if _, err := cfg.Streams[i].ConsumerOptions(nil); err != nil {
				t.Fatalf("a parsed stream's options: %v", err)
			}
			_ = cfg.Streams[i].GroupOptions()
		}
	})
}
