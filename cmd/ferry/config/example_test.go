package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// exampleEnv is what the examples reference; the test sets it so every
// example must load.
var exampleEnv = map[string]string{
	"FERRY_SOURCE_URI":     "mongodb+srv://ferry:s3cr3t-pa55@cluster0.example.net/?retryWrites=true",
	"FERRY_WEBHOOK_SECRET": "whsec_ZXhhbXBsZS13ZWJob29rLXNpZ25pbmcta2V5LTAwMDE=",
	"FERRY_KAFKA_USER":     "ferry-producer",
	"FERRY_KAFKA_PASSWORD": "k4fka-sasl-pa55",
	"FERRY_GCP_PROJECT":    "ferry-prod",
}

func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("../../../examples/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for k, v := range exampleEnv {
		t.Setenv(k, v)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := config.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			out := cfg.Redacted()
			for _, secret := range []string{"s3cr3t-pa55", "ZXhhbXBsZS13ZWJob29rLXNpZ25pbmcta2V5LTAwMDE", "k4fka-sasl-pa55"} {
				if strings.Contains(out, secret) {
					t.Errorf("Redacted leaks %q:\n%s", secret, out)
				}
			}
			for i := range cfg.Streams {
				if _, err := cfg.Streams[i].ConsumerOptions(nil); err != nil {
					t.Errorf("stream %d: %v", i, err)
				}
			}
		})
	}
}

func TestExampleSinks(t *testing.T) {
	for k, v := range exampleEnv {
		t.Setenv(k, v)
	}
	for file, typ := range map[string]string{
		"webhook.yaml": config.SinkWebhook, "stdout.yaml": config.SinkStdout, "mongodb.yaml": config.SinkMongoDB,
		"nats.yaml": config.SinkNATS, "kafka.yaml": config.SinkKafka, "pubsub.yaml": config.SinkPubSub,
	} {
		cfg, err := config.Load(filepath.Join("..", "..", "..", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Streams[0].Sink.Type; got != typ {
			t.Errorf("%s: sink type %q, want %q", file, got, typ)
		}
	}
}
