package group

import (
	"github.com/ferry-io/ferry/mongoerr"
)

// Connection pools. Each partition's change stream holds one of the
// client's pooled connections while a getMore waits for events (up to
// ferry.MaxAwaitTime), so a member running N partitions keeps N of the
// client's connections busy nearly all the time. When the state database
// belongs to the same client, lease renewals, heartbeats and checkpoints
// queue behind those getMores; once N reaches the pool's size (the
// driver's maxPoolSize, 100 by default) they time out waiting for a
// connection and leases are lost although nothing is wrong. New cannot
// see a client's pool size, so the group explains the symptom when it
// meets it: the first state-store operation that times out waiting for a
// pooled connection logs what to do, once per Group.

// warnPool logs, the first time err is a timeout waiting for a pooled
// connection (mongoerr.IsPoolTimeout), why and what to do.
func (g *Group) warnPool(err error) {
	if !mongoerr.IsPoolTimeout(err) || !g.poolWarned.CompareAndSwap(false, true) {
		return
	}
	if g.cfg.state.Client() == g.client {
		g.log.Warn("the state store's operations wait for pooled connections held by the partitions' change streams: "+
			"StateDatabase is a database of the client given to New, whose pool each partition's change stream holds a connection of while it waits for events; "+
			"give StateDatabase a client of its own (leases, heartbeats and checkpoints then never queue behind the streams), "+
			"or set that client's maxPoolSize above the number of partitions plus a few",
			"partitions", g.cfg.partitions, "err", err)
		return
	}
	g.log.Warn("the state store's operations time out waiting for a pooled connection of StateDatabase's client: raise its maxPoolSize",
		"partitions", g.cfg.partitions, "err", err)
}
