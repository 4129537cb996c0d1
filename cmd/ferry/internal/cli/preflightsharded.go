package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// A sharded cluster, read through mongos. Ferry's change streams, snapshots
// and checks all go through mongos, as a client's should; two things of a
// sharded cluster are the shards' own, which mongos does not show:
//
//   - The latency an idle shard adds. mongos returns an event only once
//     every shard has reported progress past it (its postBatchResumeToken);
//     a shard with no writes reports progress only with its periodic no-op,
//     written every periodicNoopIntervalSecs (10 s by default, 1 to 10, a
//     startup parameter of mongod). So while a shard is idle, an event on
//     another waits up to that long before ferry can read it.
//   - The oplog window. A change stream through mongos loses its position
//     when any shard's oplog no longer holds it: the window ferry measures
//     through mongos is the shortest shard's, and each shard's oplog is
//     sized on that shard.
//
// `ferry check` lists the shards (listShards) and, where this machine and
// the source user can reach them directly (the hosts listShards gives, the
// source URI's credentials and options), reads each shard's no-op interval
// and measures its oplog window. A shard it cannot read (unreachable, or
// refused: from 8.0 direct operations on a shard need the
// directShardOperations role) gets a warn saying how to check it there.

// shardInfo is a shard as listShards names it, and what was read of it.
type shardInfo struct {
	id, host string // host: "<replSetName>/<host:port>,..."
	client   *mongo.Client
	err      error // it could not be reached directly
	// noop is its periodicNoopIntervalSecs (0: not read; noopErr why).
	noop    time.Duration
	noopErr error
}

// shardsOf lists a mongos' shards (listShards).
func shardsOf(ctx context.Context, client *mongo.Client) ([]*shardInfo, error) {
	var reply struct {
		Shards []struct {
			ID   string `bson:"_id"`
			Host string `bson:"host"`
		} `bson:"shards"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "listShards", Value: 1}}).Decode(&reply); err != nil {
		return nil, err
	}
	out := make([]*shardInfo, 0, len(reply.Shards))
	for _, s := range reply.Shards {
		out = append(out, &shardInfo{id: s.ID, host: s.Host})
	}
	return out, nil
}

// shardURI is uri with its hosts replaced by a shard's (host is
// listShards' "<replSetName>/<host:port>,..."), its replica set named: the
// source URI's credentials and options reach the shard directly. An SRV
// URI becomes a plain one, with the TLS and authSource an SRV URI implies
// unless it sets them.
func shardURI(uri config.MongoURI, host string) string {
	s := uri.Reveal()
	scheme, rest, _ := strings.Cut(s, "://")
	srv := scheme == "mongodb+srv"
	user := ""
	if i := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); i >= 0 {
		user, rest = rest[:i+1], rest[i+1:]
	}
	tail := ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		tail = rest[i:]
	}
	set, hosts, ok := strings.Cut(host, "/")
	if !ok {
		set, hosts = "", host
	}
	path, query, _ := strings.Cut(tail, "?")
	if path == "" {
		path = "/"
	}
	var params []string
	for _, kv := range strings.Split(query, "&") {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "", "replicaset", "directconnection", "loadbalanced":
			continue
		}
		params = append(params, kv)
	}
	has := func(key string) bool {
		return slices.ContainsFunc(params, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return strings.EqualFold(k, key)
		})
	}
	if srv && !has("tls") && !has("ssl") {
		params = append(params, "tls=true")
	}
	if srv && !has("authSource") {
		params = append(params, "authSource=admin")
	}
	if set != "" {
		params = append(params, "replicaSet="+set)
	}
	out := "mongodb://" + user + hosts + path
	if len(params) > 0 {
		out += "?" + strings.Join(params, "&")
	}
	return out
}

// readShards connects to each shard directly and reads its no-op
// interval.
func (p *preflight) readShards(ctx context.Context, uri config.MongoURI, shards []*shardInfo) {
	for _, sh := range shards {
		c, err := mongo.Connect(options.Client().ApplyURI(shardURI(uri, sh.host)).
			SetServerSelectionTimeout(p.opts.timeout).SetConnectTimeout(p.opts.timeout).SetAppName("ferry check"))
		if err != nil {
			sh.err = err
			continue
		}
		sh.client = c
		p.extra = append(p.extra, c)
		cctx, cancel := context.WithTimeout(ctx, p.opts.timeout)
		var reply struct {
			Noop int64 `bson:"periodicNoopIntervalSecs"`
		}
		err = c.Database("admin").RunCommand(cctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "periodicNoopIntervalSecs", Value: 1}}).Decode(&reply)
		cancel()
		switch {
		case err == nil && reply.Noop > 0:
			sh.noop = time.Duration(reply.Noop) * time.Second
		case err == nil:
			sh.noopErr = errors.New("the reply has no periodicNoopIntervalSecs")
		default:
			sh.noopErr = err
		}
	}
}

// shardedFindings are a mongos' rows: its shards, and the latency an idle
// shard adds (with the shards read directly, ferry check only).
func (p *preflight) shardedFindings(ctx context.Context, subject string, uri config.MongoURI, client *mongo.Client) []finding {
	lctx, cancel := context.WithTimeout(ctx, p.opts.timeout)
	shards, err := shardsOf(lctx, client)
	cancel()
	if err != nil {
		return []finding{{Subject: subject, Check: "shards", Result: checkWarn,
			Detail: fmt.Sprintf("could not list the shards (listShards): %v; ferry needs no shard list to run, but this check cannot read each shard's no-op interval and oplog", err),
			Fix:    "grant the source user clusterMonitor (it has listShards) to have ferry check read the shards"}}
	}
	p.shards[uri] = shards
	var names []string
	for _, sh := range shards {
		names = append(names, sh.id+" ("+sh.host+")")
	}
	out := []finding{{Subject: subject, Check: "shards", Result: checkPass,
		Detail: fmt.Sprintf("%d shard(s): %s; ferry reads them all through mongos", len(shards), strings.Join(names, ", "))}}
	if !p.opts.shards {
		return out
	}
	p.readShards(ctx, uri, shards)
	return append(out, idleShardFinding(subject, shards))
}

// idleShardLatencyWarn: an idle shard holding events back this long or
// more is a warn.
const idleShardLatencyWarn = 5 * time.Second

// idleShardFinding says how long an event may wait at mongos for an idle
// shard: the longest periodicNoopIntervalSecs of the shards.
func idleShardFinding(subject string, shards []*shardInfo) finding {
	f := finding{Subject: subject, Check: "idle-shard latency"}
	var worst time.Duration
	var read, unread []string
	for _, sh := range shards {
		switch {
		case sh.err != nil:
			unread = append(unread, fmt.Sprintf("%s (cannot connect: %v)", sh.id, sh.err))
		case sh.noopErr != nil:
			unread = append(unread, fmt.Sprintf("%s (%v)", sh.id, sh.noopErr))
		default:
			read = append(read, fmt.Sprintf("%s %v", sh.id, sh.noop))
			worst = max(worst, sh.noop)
		}
	}
	why := "mongos returns an event once every shard has reported progress past it; an idle shard reports only with its periodic no-op"
	fix := "on each shard's members: mongod --setParameter periodicNoopIntervalSecs=1 (a startup parameter, 1-10 s; Atlas: ask MongoDB support), or accept the delay"
	if len(unread) > 0 {
		f.Result = checkWarn
		f.Detail = fmt.Sprintf("could not read periodicNoopIntervalSecs on %s: expect up to 10 s, its default (%s); ferry_read_delay_seconds and the read delay of ferry status show what events wait",
			strings.Join(unread, ", "), why)
		if len(read) > 0 {
			f.Detail += "; read: " + strings.Join(read, ", ")
		}
		f.Fix = "check it on each shard's primary: db.adminCommand({getParameter: 1, periodicNoopIntervalSecs: 1}); " + fix
		return f
	}
	f.Detail = fmt.Sprintf("while a shard is idle an event on another waits up to %v before ferry reads it, twice that just after the idle shard's own last write (%s: periodicNoopIntervalSecs %s); ferry_read_delay_seconds and the read delay of ferry status show it",
		worst, why, strings.Join(read, ", "))
	f.Result = checkPass
	if worst >= idleShardLatencyWarn {
		f.Result = checkWarn
		f.Fix = fix
	}
	return f
}

// shardOplogFindings measure each shard's oplog window directly, for a
// stream through mongos (whose own window is the shortest shard's).
func (s *streamCheck) shardOplogFindings(ctx context.Context) []finding {
	var out []finding
	for _, sh := range s.p.shards[s.st.Source.URI] {
		f := finding{Subject: s.subject, Check: "oplog window of " + sh.id}
		var err error
		if sh.client == nil {
			err = sh.err
			if err == nil {
				err = errors.New("not connected")
			}
		} else {
			var start bson.Timestamp
			if start, err = s.oplogStart(ctx, sh.client); err == nil {
				out = append(out, s.judgeWindow(f, start, fmt.Sprintf(" on %s (%s)", sh.id, sh.host),
					fmt.Sprintf("on %s's members (%s): ", sh.id, sh.host)))
				continue
			}
		}
		f.Result = checkWarn
		f.Detail = fmt.Sprintf("could not read %s's oplog directly: %v; the window through mongos (above) is the shortest shard's", sh.id, err)
		f.Fix = fmt.Sprintf("check it on %s's primary (%s): rs.printReplicationInfo() (from 8.0 a direct connection needs the directShardOperations role)", sh.id, sh.host)
		out = append(out, f)
	}
	return out
}
