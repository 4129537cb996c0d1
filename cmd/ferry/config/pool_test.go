package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// poolConfig is two streams of 100 and 50 partitions on one source URI
// with the given query, and state.uri (with stateQuery) unless it is "-".
func poolConfig(query, stateQuery string) string {
	state := ""
	if stateQuery != "-" {
		state = fmt.Sprintf("state: {uri: \"mongodb://state:27017/?replicaSet=rs0%s\"}\n", stateQuery)
	}
	stream := func(name string, partitions int) string {
		return fmt.Sprintf(`  - name: %s
    source:
      uri: "mongodb://db1:27017/?replicaSet=rs0%s"
      scope: {collection: shop.%s}
    group: {partitions: %d}
    sink: {stdout: {}}
`, name, query, name, partitions)
	}
	return state + "streams:\n" + stream("orders", 100) + stream("carts", 50)
}

// TestPoolNeeds: the source client of a URI needs a connection per
// partition of the streams reading it, plus the headroom; the state
// client one per stream plus the headroom; without maxPoolSize in the URI
// the pool is the need, or the driver's 100 when that is larger; with it,
// the URI's own.
func TestPoolNeeds(t *testing.T) {
	c, err := config.Parse([]byte(poolConfig("", "")), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	src := c.Streams[0].Source.URI
	if got, want := c.SourcePoolNeed(src), uint64(150+config.PoolHeadroom); got != want {
		t.Errorf("SourcePoolNeed = %d, want %d", got, want)
	}
	if got, want := c.StatePoolNeed(), uint64(150+2+config.PoolHeadroom); got != want {
		t.Errorf("StatePoolNeed = %d, want %d", got, want)
	}
	if size, explicit := config.PoolSize(src, c.SourcePoolNeed(src)); size != 160 || explicit {
		t.Errorf("PoolSize(source) = %d, %v; want 160, false", size, explicit)
	}
	if size, explicit := config.PoolSize(c.StateURI(), c.StatePoolNeed()); size != 162 || explicit {
		t.Errorf("PoolSize(state) = %d, %v; want 162, false", size, explicit)
	}
	small, err := config.Parse([]byte(minimal), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if size, explicit := config.PoolSize(small.StateURI(), small.StatePoolNeed()); size != config.DriverMaxPoolSize || explicit {
		t.Errorf("PoolSize(state) of one partition = %d, %v; want the driver's 100, false", size, explicit)
	}
	c, err = config.Parse([]byte(poolConfig("&MAXPOOLSIZE=500", "&maxPoolSize=0")), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if size, explicit := config.PoolSize(c.Streams[0].Source.URI, 160); size != 500 || !explicit {
		t.Errorf("PoolSize with maxPoolSize=500 = %d, %v; want 500, true", size, explicit)
	}
	if size, explicit := config.PoolSize(c.StateURI(), 12); size != 0 || !explicit {
		t.Errorf("PoolSize with maxPoolSize=0 = %d, %v; want 0 (no limit), true", size, explicit)
	}
}

// TestPoolTooSmall: a maxPoolSize below what the client needs is a
// problem of that URI, naming the need and the fix; 0 (no limit) and a
// big enough one are not.
func TestPoolTooSmall(t *testing.T) {
	cases := []struct {
		name, query, state string
		path, msg          string // "" path: no problem
	}{
		{"default pools", "", "", "", ""},
		{"big enough", "&maxPoolSize=160", "&maxPoolSize=162", "", ""},
		{"no limit", "&maxPoolSize=0", "&maxPoolSize=0", "", ""},
		{"source too small", "&maxPoolSize=100", "", "streams[0].source.uri",
			"maxPoolSize=100 is too small for this URI's source client, which needs 160 connections: one for each of the 150 partition(s) of the stream(s) reading it (orders, carts), whose change streams each hold a connection while they wait for events, plus 10 for ferry's other reads; set maxPoolSize to at least 160 (or 0: no limit), or leave it out and ferry sizes the pool"},
		{"state too small", "", "&maxPoolSize=100", "state.uri",
			"maxPoolSize=100 is too small for the state store's client, which needs 162 connections: one for each of the 150 partition(s), so that every lease can be renewed at once, one for each of the 2 stream(s)"},
		{"state on the source's URI too small", "&maxPoolSize=160", "-", "streams[0].source.uri", "is too small for the state store's client, which needs 162 connections"},
		{"not a number", "&maxPoolSize=lots", "", "streams[0].source.uri", "maxPoolSize must be a whole number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(poolConfig(tc.query, tc.state)), testEnv(nil))
			if tc.path == "" {
				if err != nil {
					t.Fatalf("unexpected problems: %v", err)
				}
				return
			}
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					if strings.Contains(p.Message, "db1") || strings.Contains(p.Message, "state:27017") {
						t.Errorf("the problem shows the URI: %s", p.Message)
					}
					return
				}
			}
			t.Fatalf("no problem at %s containing %q in: %v", tc.path, tc.msg, err)
		})
	}
}
