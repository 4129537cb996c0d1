package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

const pubsubSinkConfig = `
streams:
  - name: orders
    source: {uri: "mongodb://db1:27017/?replicaSet=rs0", scope: {collection: shop.orders}}
    sink:
      pubsub:
        project: ferry-prod
        topic: ferry-orders
        timeout: 3s
`

func TestPubSubSink(t *testing.T) {
	cfg, err := config.Parse([]byte(pubsubSinkConfig), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Streams[0].Sink
	p := s.PubSub
	if s.Type != config.SinkPubSub || p == nil || p.Project != "ferry-prod" || p.Topic != "ferry-orders" ||
		p.Timeout != 3*time.Second || p.Encoding != "relaxed" || p.Endpoint != "" || p.Emulator != "" {
		t.Fatalf("pubsub sink = %+v", p)
	}
	for _, good := range []struct{ from, to string }{
		{"topic: ferry-orders", "topic: projects/ferry-prod/topics/ferry-orders"},
		{"timeout: 3s", "endpoint: us-east1-pubsub.googleapis.com:443"},
		{"timeout: 3s", "emulator: localhost:8085"},
		{"timeout: 3s", "encoding: canonical"},
		{"topic: ferry-orders", "topic: Ab~+%._-x"},
	} {
		if _, err := config.Parse([]byte(strings.Replace(pubsubSinkConfig, good.from, good.to, 1)), testEnv(nil)); err != nil {
			t.Errorf("%q → %q: %v", good.from, good.to, err)
		}
	}
	for _, c := range []struct{ from, to, path, msg string }{
		{"project: ferry-prod", "", "streams[0].sink.pubsub.project", "is required"},
		{"project: ferry-prod", "project: a/b", "streams[0].sink.pubsub.project", "without '/'"},
		{"project: ferry-prod", "project: [a]", "streams[0].sink.pubsub.project", ""},
		{"topic: ferry-orders", "", "streams[0].sink.pubsub.topic", "is required"},
		{"topic: ferry-orders", "topic: ab", "streams[0].sink.pubsub.topic", "3 to 255 characters"},
		{"topic: ferry-orders", "topic: 9orders", "streams[0].sink.pubsub.topic", "starts with a letter"},
		{"topic: ferry-orders", "topic: google-orders", "streams[0].sink.pubsub.topic", `"goog"`},
		{"topic: ferry-orders", "topic: ferry orders", "streams[0].sink.pubsub.topic", "is not allowed"},
		{"topic: ferry-orders", "topic: projects/other/topics/ferry-orders", "streams[0].sink.pubsub.topic", "names project"},
		{"topic: ferry-orders", "topic: projects/ferry-prod/subscriptions/x", "streams[0].sink.pubsub.topic", "must be a topic id"},
		{"timeout: 3s", "timeout: 0s", "streams[0].sink.pubsub.timeout", ""},
		{"timeout: 3s", "encoding: bson", "streams[0].sink.pubsub.encoding", ""},
		{"timeout: 3s", "endpoint: https://pubsub.googleapis.com", "streams[0].sink.pubsub.endpoint", "without a scheme"},
		{"timeout: 3s", "endpoint: pubsub.googleapis.com", "streams[0].sink.pubsub.endpoint", "host:port"},
		{"timeout: 3s", `emulator: ""`, "streams[0].sink.pubsub.emulator", "must not be empty"},
		{"timeout: 3s", "emulator: localhost:99999", "streams[0].sink.pubsub.emulator", "port must be"},
		{"timeout: 3s", "emulator: localhost:8085\n        endpoint: pubsub.googleapis.com:443", "streams[0].sink.pubsub.emulator", "cannot be combined"},
		{"timeout: 3s", "credentials: key.json", "streams[0].sink.pubsub.credentials", ""},
	} {
		_, err := config.Parse([]byte(strings.Replace(pubsubSinkConfig, c.from, c.to, 1)), testEnv(nil))
		found := false
		for _, p := range problems(t, err) {
			found = found || p.Path == c.path && strings.Contains(p.Message, c.msg)
		}
		if !found {
			t.Errorf("edit %q → %q: no problem at %s containing %q: %v", c.from, c.to, c.path, c.msg, err)
		}
	}
	// `pubsub:` with nothing under it names both required keys.
	_, err = config.Parse([]byte(strings.Split(pubsubSinkConfig, "      pubsub:")[0]+"      pubsub:\n"), testEnv(nil))
	for _, want := range []string{"streams[0].sink.pubsub.project", "streams[0].sink.pubsub.topic"} {
		found := false
		for _, p := range problems(t, err) {
			found = found || p.Path == want
		}
		if !found {
			t.Errorf("empty pubsub: no problem at %s: %v", want, err)
		}
	}
}
