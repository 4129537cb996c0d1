package config_test

import (
	"strings"
	"testing"

	"github.com/ferry-io/ferry/config"
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
