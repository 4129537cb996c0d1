package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

func TestNATSSink(t *testing.T) {
	const base = `
streams:
  - name: orders
    source: {uri: "mongodb://db1:27017/?replicaSet=rs0", scope: {collection: shop.orders}}
    sink:
      nats: {url: "nats://127.0.0.1:4222", timeout: 3s}
`
	cfg, err := config.Parse([]byte(base), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Streams[0].Sink.NATS
	if cfg.Streams[0].Sink.Type != config.SinkNATS || n.Subject != "ferry.{db}.{coll}.{op}" || n.Timeout != 3*time.Second || n.Encoding != "relaxed" {
		t.Fatalf("nats sink = %+v", n)
	}
	for _, c := range []struct{ from, to, path string }{
		{`url: "nats://127.0.0.1:4222", `, ``, "streams[0].sink.nats.url"},
		{`nats://127.0.0.1:4222`, `http://x`, "streams[0].sink.nats.url"},
		{`timeout: 3s`, `timeout: -1s`, "streams[0].sink.nats.timeout"},
		{`timeout: 3s`, `colour: red`, "streams[0].sink.nats.colour"},
		{`timeout: 3s`, `subject: "ferry.{foo}.>"`, "streams[0].sink.nats.subject"},
		{`timeout: 3s`, `subject: ""`, "streams[0].sink.nats.subject"},
		{`nats://127.0.0.1:4222`, `nats://127.0.0.1:4222,http://x`, "streams[0].sink.nats.url"},
	} {
		_, err := config.Parse([]byte(strings.Replace(base, c.from, c.to, 1)), testEnv(nil))
		found := false
		for _, p := range problems(t, err) {
			found = found || p.Path == c.path
		}
		if !found {
			t.Errorf("edit %q → %q: no problem at %s: %v", c.from, c.to, c.path, err)
		}
	}
}
