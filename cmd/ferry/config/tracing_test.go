package config_test

import (
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

const tracingStream = `
streams:
  - name: s
    source: {uri: "mongodb://h/?replicaSet=rs0", scope: {collection: shop.orders}}
    sink: {stdout: {}}
`

func TestTracing(t *testing.T) {
	cfg, err := config.Parse([]byte("tracing: {endpoint: \"http://collector:4318\", service_name: orders-cdc}\n"+tracingStream), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tracing.Endpoint != "http://collector:4318" || cfg.Tracing.ServiceName != "orders-cdc" {
		t.Errorf("tracing: %+v", cfg.Tracing)
	}
	cfg, err = config.Parse([]byte(tracingStream), nil)
	if err != nil || cfg.Tracing != (config.Tracing{}) {
		t.Errorf("no tracing key: %+v, %v", cfg.Tracing, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{`tracing: {endpoint: "http://otel:s3cret-pw@collector:4318"}`, "tracing.endpoint: must not hold user info"},
		{`tracing: {endpoint: "grpc://collector:4317"}`, "tracing.endpoint: the scheme must be http or https"},
		{`tracing: {endpoint: "collector"}`, "tracing.endpoint: must be the collector's OTLP/HTTP URL"},
		{`tracing: {sampler: always}`, "tracing.sampler"},
	} {
		_, err := config.Parse([]byte(tc.yaml+"\n"+tracingStream), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("%s: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
