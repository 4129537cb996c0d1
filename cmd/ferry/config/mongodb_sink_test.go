package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

const mongoSinkConfig = `
streams:
  - name: orders
    source:
      uri: mongodb://db1:27017/?replicaSet=rs0
      scope: {collection: shop.orders}
      full_document: updateLookup
    delivery: {mode: transactional}
    sink:
      mongodb: {database: readmodel, collection: orders}
`

func TestMongoDBSink(t *testing.T) {
	cfg, err := config.Parse([]byte(mongoSinkConfig), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Streams[0].Sink
	if s.Type != config.SinkMongoDB || s.MongoDB.Database != "readmodel" || s.MongoDB.Collection != "orders" {
		t.Fatalf("sink = %+v", s)
	}
	bad := []struct{ name, from, to, path string }{
		{"no full document", "      full_document: updateLookup\n", "", "streams[0].source.full_document"},
		{"full document whenAvailable", "full_document: updateLookup", "full_document: whenAvailable", "streams[0].source.full_document"},
		{"full document default", "full_document: updateLookup", "full_document: default", "streams[0].source.full_document"},
		{"missing collection", "collection: orders}", "}", "streams[0].sink.mongodb.collection"},
		{"bad database", "database: readmodel", "database: read.model", "streams[0].sink.mongodb.database"},
		{"other cluster for transactional", "streams:", "state: {uri: \"mongodb://other:27017/?replicaSet=rs1\"}\nstreams:", "streams[0].delivery.mode"},
		{"bolt state", "streams:", "state: {bolt: {path: x.db}}\nstreams:", "streams[0].sink.mongodb"},
	}
	for _, c := range bad {
		if !strings.Contains(mongoSinkConfig, c.from) {
			t.Fatalf("%s: edit does not apply", c.name)
		}
		_, err := config.Parse([]byte(strings.Replace(mongoSinkConfig, c.from, c.to, 1)), testEnv(nil))
		found := false
		for _, p := range problems(t, err) {
			if p.Path == c.path {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no problem at %s in %v", c.name, c.path, err)
		}
	}
}

func TestMongoDBSinkTombstoneRetention(t *testing.T) {
	with := func(v string) string {
		return strings.Replace(mongoSinkConfig, "collection: orders}", "collection: orders, tombstone_retention: "+v+"}", 1)
	}
	good := []struct {
		name, yaml string
		want       time.Duration
	}{
		{"default", mongoSinkConfig, config.DefaultTombstoneRetention},
		{"null", with("null"), config.DefaultTombstoneRetention},
		{"hours", with("2h"), 2 * time.Hour},
		{"minimum", with("1m"), time.Minute},
		{"off", with("off"), 0},
		{"env", with(`"${RETENTION}"`), 90 * time.Minute},
	}
	for _, c := range good {
		cfg, err := config.Parse([]byte(c.yaml), testEnv(map[string]string{"RETENTION": "90m"}))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := cfg.Streams[0].Sink.MongoDB.TombstoneRetention; got != c.want {
			t.Errorf("%s: tombstone_retention = %v, want %v", c.name, got, c.want)
		}
	}
	const path = "streams[0].sink.mongodb.tombstone_retention"
	bad := []struct{ name, value, msg string }{
		{"zero", "0", "at least 1m0s"},
		{"too small", "59s", "at least 1m0s"},
		{"negative", "-1h", "at least 1m0s"},
		{"not a duration", "forever", "must be a duration"},
		{"no unit", "24", "must be a duration"},
		{"OFF", "OFF", "must be a duration"},
		{"false", "false", "must be a duration"},
		{"list", "[1h]", "must be a single value"},
	}
	for _, c := range bad {
		_, err := config.Parse([]byte(with(c.value)), testEnv(nil))
		ps := problems(t, err)
		found := false
		for _, p := range ps {
			if p.Path == path && strings.Contains(p.Message, c.msg) {
				found = true
			}
		}
		if !found || len(ps) != 1 {
			t.Errorf("%s: want one problem at %s containing %q, got %v", c.name, path, c.msg, err)
		}
	}
}
