package cli

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// The daemon's MongoDB clients: one for the state store, one per source
// URI, never one for both, even when state.uri is the source's URI. Each
// partition's change stream holds one of its client's pooled connections
// while a getMore waits for events; leases, heartbeats and checkpoints
// go through the state client, so they never queue behind the streams.
// Each pool is sized by config.PoolSize (see config.PoolHeadroom), unless
// its URI sets maxPoolSize, which config.Parse checked is big enough.

// clientRole says what a client carries.
type clientRole string

const (
	roleState  clientRole = "state"  // leases, members, checkpoints, ledger, dead letters, transactions, the mongodb sink
	roleSource clientRole = "source" // the partitions' change streams and the source's reads
)

// clientKey identifies one of the daemon's clients.
type clientKey struct {
	role clientRole
	uri  string
}

// connect returns the daemon's client of role for uri, connecting it the
// first time with a pool for need connections (config.PoolSize).
func (d *daemon) connect(role clientRole, uri config.MongoURI, need uint64) (*mongo.Client, error) {
	key := clientKey{role: role, uri: uri.Reveal()}
	if c := d.clients[key]; c != nil {
		return c, nil
	}
	opts := options.Client().ApplyURI(uri.Reveal())
	size, explicit := config.PoolSize(uri, need)
	if !explicit {
		opts.SetMaxPoolSize(size)
	}
	c, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", uri, err)
	}
	d.clients[key] = c
	d.log.Info("mongodb client", "role", string(role), "uri", uri.String(), "max_pool_size", size, "needs", need, "from_uri", explicit)
	return c, nil
}
