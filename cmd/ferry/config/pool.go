package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Connection pools. `ferry run` opens one MongoDB client for the state
// store and one per source URI, never shared, even when the URIs are the
// same: each partition's change stream holds one of its client's pooled
// connections while a getMore waits for events, so a shared pool makes
// lease renewals, heartbeats and checkpoints queue behind the streams
// (issue 25: with 200 partitions on the driver's default pool of 100,
// renewals timed out and leases were lost).
//
// A source client needs a connection for every partition of every stream
// reading that URI (a member may come to run them all: after the others
// crash, or alone), plus PoolHeadroom for the rest of its work on the
// source (the oplog-window probe, verify, backfill scans). The state
// client needs one connection per partition, so that every lease can be
// renewed at once, one per stream for the group's ownership watch, plus
// PoolHeadroom for heartbeats, checkpoints, the ledger and dead letters.
// Without maxPoolSize in a URI, ferry sets each client's pool to that
// need, or to the driver's default (DriverMaxPoolSize) when it is larger.
// A maxPoolSize in a URI is kept as written, and Parse reports one below
// the need as a problem of that URI (0, no limit, is always enough).

// PoolHeadroom is how many pooled connections a client needs beyond the
// ones its change streams hold.
const PoolHeadroom = 10

// DriverMaxPoolSize is the Go driver's default maxPoolSize.
const DriverMaxPoolSize = 100

// SourcePoolNeed returns how many pooled connections the source client of
// uri needs: one per partition of every stream reading uri (one per
// stream with state.bolt: a single consumer), plus PoolHeadroom.
func (c *Config) SourcePoolNeed(uri MongoURI) uint64 {
	var n uint64
	for _, s := range c.Streams {
		if s.Source.URI != uri {
			continue
		}
		if c.State.Bolt != nil {
			n++
		} else {
			n += uint64(max(s.Group.Partitions, 1))
		}
	}
	return n + PoolHeadroom
}

// StatePoolNeed returns how many pooled connections the state store's
// client needs: one per partition of every stream (each lease is renewed
// on its own schedule, and a renewal must never wait for a connection),
// one per stream (its group's ownership watch, a change stream), plus
// PoolHeadroom. It is 0 with state.bolt.
func (c *Config) StatePoolNeed() uint64 {
	if c.State.Bolt != nil {
		return 0
	}
	var n uint64
	for _, s := range c.Streams {
		n += uint64(max(s.Group.Partitions, 1)) + 1
	}
	return n + PoolHeadroom
}

// PoolSize returns the maxPoolSize of a client of uri that needs need
// connections: the URI's own maxPoolSize when it sets one (explicit true),
// else need or DriverMaxPoolSize, whichever is larger.
func PoolSize(uri MongoURI, need uint64) (size uint64, explicit bool) {
	if n, set, err := uri.MaxPoolSize(); set && err == nil {
		return n, true
	}
	return max(need, DriverMaxPoolSize), false
}

// MaxPoolSize returns the maxPoolSize option of the connection string
// (the option's name is not case-sensitive), and whether it has one. Its
// error never contains the connection string.
func (u MongoURI) MaxPoolSize() (n uint64, set bool, err error) {
	_, _, _, rest, ok := splitMongoURI(string(u))
	if !ok {
		return 0, false, nil
	}
	_, query, _ := strings.Cut(rest, "?")
	values, err := url.ParseQuery(query)
	if err != nil {
		return 0, false, nil // checkMongoURI reports it
	}
	for k, vs := range values {
		if !strings.EqualFold(k, "maxPoolSize") || len(vs) == 0 {
			continue
		}
		n, err := strconv.ParseUint(vs[len(vs)-1], 10, 64)
		if err != nil {
			return 0, true, errors.New("maxPoolSize must be a whole number (0: no limit)")
		}
		return n, true, nil
	}
	return 0, false, nil
}

// checkPools reports a maxPoolSize, in a source URI or in state.uri, too
// small for what the client runs on it (see PoolHeadroom).
func (d *decoder) checkPools(c *Config) {
	checked := map[MongoURI]bool{}
	for i, s := range c.Streams {
		if s.Source.URI == "" || checked[s.Source.URI] {
			continue
		}
		checked[s.Source.URI] = true
		var names []string
		for _, o := range c.Streams {
			if o.Source.URI == s.Source.URI {
				names = append(names, o.Name)
			}
		}
		need := c.SourcePoolNeed(s.Source.URI)
		unit := "partition(s) of the stream(s)"
		if c.State.Bolt != nil {
			unit = "stream(s)" // one consumer each
		}
		why := fmt.Sprintf("one for each of the %d %s reading it (%s), whose change streams each hold a connection while they wait for events, plus %d for ferry's other reads",
			need-PoolHeadroom, unit, strings.Join(names, ", "), PoolHeadroom)
		d.checkPool(fmt.Sprintf("streams[%d].source.uri", i), s.Source.URI, need, "this URI's source client", why)
	}
	if c.State.Bolt == nil && c.StateURI() != "" {
		// Without state.uri, the state client connects with the first
		// stream's source URI.
		path := "state.uri"
		if c.State.URI == "" {
			path = "streams[0].source.uri"
		}
		need := c.StatePoolNeed()
		d.checkPool(path, c.StateURI(), need, "the state store's client",
			fmt.Sprintf("one for each of the %d partition(s), so that every lease can be renewed at once, one for each of the %d stream(s), for its group's ownership watch, plus %d for heartbeats, checkpoints, the ledger and dead letters",
				need-PoolHeadroom-uint64(len(c.Streams)), len(c.Streams), PoolHeadroom))
	}
}

// checkPool reports the maxPoolSize of uri (at path) when it is not a
// number, or below need: client says which client, why how need adds up.
func (d *decoder) checkPool(path string, uri MongoURI, need uint64, client, why string) {
	n, set, err := uri.MaxPoolSize()
	switch {
	case err != nil:
		d.add(path, "%v", err)
	case set && n > 0 && n < need:
		d.add(path, "maxPoolSize=%d is too small for %s, which needs %d connections: %s; set maxPoolSize to at least %d (or 0: no limit), or leave it out and ferry sizes the pool",
			n, client, need, why, need)
	}
}
