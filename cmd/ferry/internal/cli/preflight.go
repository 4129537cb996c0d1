package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/mongoerr"
)

// The preflight: what `ferry check` prints and `ferry run` logs when it
// starts. It checks the deployment a configuration runs against, not the
// configuration (config.Parse does that): each server's topology, version
// and clock, and for the state store and every stream what ferry will ask
// of the server — a change stream of the stream's definition, the
// features it relies on ($toHashedIndexKey for a group's partitions,
// $changeStreamSplitLargeEvent, pre- and post-images), the users'
// privileges, the oplog's window and the pools. Each finding is pass,
// warn (ferry runs, with the limit the detail says) or fail (ferry, or
// the feature the configuration asks for, will not work), with a fix.
//
// Everything is read-only: change streams are opened at the current
// cluster time and closed before their first getMore; collections are
// listed, never created.

// checkResult is a finding's verdict.
type checkResult string

const (
	checkPass checkResult = "pass"
	checkWarn checkResult = "warn"
	checkFail checkResult = "fail"
)

// finding is one row of the preflight.
type finding struct {
	// Subject is what was checked: "server <hosts>", "state", "stream <name>"
	// or "config".
	Subject string      `json:"subject"`
	Check   string      `json:"check"`
	Result  checkResult `json:"result"`
	Detail  string      `json:"detail"`
	Fix     string      `json:"fix,omitempty"`
}

// preflightOptions say what the preflight measures.
type preflightOptions struct {
	// downtime is the longest the operator plans to have every member
	// stopped; the oplog must hold it (0: the window is only reported).
	downtime time.Duration
	// oplog measures each stream's oplog window (Consumer.OplogStart:
	// tens of change-stream opens). `ferry run` leaves it to its oplog
	// watcher, which exports it as ferry_oplog_window_seconds.
	oplog bool
	// timeout bounds each check's round trips.
	timeout time.Duration
	// shards reads the shards of a sharded cluster directly (their
	// no-op interval, their oplog windows): `ferry check` only.
	shards bool
}

// preflight runs the checks of one configuration.
type preflight struct {
	cfg  *config.Config
	opts preflightOptions
	// state is the state store's client (nil with state.bolt); sources
	// the source clients by URI.
	state   *mongo.Client
	sources map[config.MongoURI]*mongo.Client
	// cps is the checkpoint store the streams' consumers are built with
	// (start_at {checkpoints_of}); no check reads it.
	cps checkpoint.Store
	// servers are the servers probed, by URI.
	servers map[config.MongoURI]*serverInfo
	// shards are a mongos' shards (preflightsharded.go), by URI; extra the
	// clients opened to them, for the caller to disconnect.
	shards map[config.MongoURI][]*shardInfo
	extra  []*mongo.Client
}

// run runs every check and returns the findings: the servers', the state
// store's, then each stream's.
func (p *preflight) run(ctx context.Context) []finding {
	p.servers = map[config.MongoURI]*serverInfo{}
	p.shards = map[config.MongoURI][]*shardInfo{}
	var out []finding
	// Each server once, whatever reads it (state, sources).
	var uris []config.MongoURI
	roles := map[config.MongoURI][]string{}
	if p.state != nil {
		uris = append(uris, p.cfg.StateURI())
		roles[p.cfg.StateURI()] = []string{"state"}
	}
	for _, st := range p.cfg.Streams {
		if _, seen := roles[st.Source.URI]; !seen {
			uris = append(uris, st.Source.URI)
		}
		roles[st.Source.URI] = append(roles[st.Source.URI], "stream "+st.Name)
	}
	for _, uri := range uris {
		client := p.sources[uri]
		if client == nil {
			client = p.state
		}
		info := probeServer(ctx, client, p.opts.timeout)
		p.servers[uri] = info
		out = append(out, p.serverFindings(ctx, uri, client, info, roles[uri])...)
	}
	if p.state != nil {
		out = append(out, p.stateFindings(ctx)...)
	}
	for i := range p.cfg.Streams {
		out = append(out, p.streamFindings(ctx, &p.cfg.Streams[i])...)
	}
	return out
}

// serverInfo is what hello and buildInfo said of a server.
type serverInfo struct {
	err          error // it could not be reached
	hosts        string
	setName      string
	mongos       bool
	version      string
	versionArray []int32
	// localTime is the server's clock in hello, read between sent and
	// received by this machine's; opTime its cluster time.
	localTime      time.Time
	sent, received time.Time
	opTime         bson.Timestamp
}

// atLeast reports whether the server's release is major.minor or later.
func (s *serverInfo) atLeast(major, minor int32) bool {
	v := append(append([]int32(nil), s.versionArray...), 0, 0)
	return v[0] > major || v[0] == major && v[1] >= minor
}

// standalone reports whether the server is neither a replica-set member
// nor mongos: it has no change streams.
func (s *serverInfo) standalone() bool { return s.setName == "" && !s.mongos }

// hasSplitStage: $changeStreamSplitLargeEvent is in 7.0+ and 6.0.9+, as
// the consumer decides (Consumer.checkSplit).
func (s *serverInfo) hasSplitStage() bool {
	v := append(append([]int32(nil), s.versionArray...), 0, 0, 0)
	return v[0] >= 7 || v[0] == 6 && v[1] == 0 && v[2] >= 9
}

// probeServer runs hello and buildInfo.
func probeServer(ctx context.Context, client *mongo.Client, timeout time.Duration) *serverInfo {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info := &serverInfo{}
	if client == nil {
		info.err = errors.New("no client: its connection string was refused")
		return info
	}
	// The first hello may wait for the connection (dial, handshake, TLS):
	// the clock is read on the second, over a pooled connection.
	var raw bson.Raw
	for range 2 {
		var err error
		info.sent = time.Now()
		raw, err = client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
		info.received = time.Now()
		if err != nil {
			info.err = err
			return info
		}
	}
	info.setName, _ = raw.Lookup("setName").StringValueOK()
	msg, _ := raw.Lookup("msg").StringValueOK()
	info.mongos = msg == "isdbgrid"
	if dt, ok := raw.Lookup("localTime").DateTimeOK(); ok {
		info.localTime = time.UnixMilli(dt)
	}
	if t, i, ok := raw.Lookup("operationTime").TimestampOK(); ok {
		info.opTime = bson.Timestamp{T: t, I: i}
	} else if t, i, ok := raw.Lookup("$clusterTime", "clusterTime").TimestampOK(); ok {
		info.opTime = bson.Timestamp{T: t, I: i}
	}
	if me, ok := raw.Lookup("me").StringValueOK(); ok {
		info.hosts = me
	}
	var bi struct {
		Version      string  `bson:"version"`
		VersionArray []int32 `bson:"versionArray"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&bi); err != nil {
		info.err = fmt.Errorf("buildInfo: %w", err)
		return info
	}
	info.version, info.versionArray = bi.Version, bi.VersionArray
	return info
}

// serverFindings are the topology, version, featureCompatibilityVersion
// and clock of the server at uri, read by roles.
func (p *preflight) serverFindings(ctx context.Context, uri config.MongoURI, client *mongo.Client, info *serverInfo, roles []string) []finding {
	subject := "server " + uriHosts(uri)
	used := "used by " + strings.Join(roles, ", ")
	if info.err != nil {
		return []finding{{Subject: subject, Check: "topology", Result: checkFail,
			Detail: fmt.Sprintf("cannot reach it (%s): %v", used, info.err),
			Fix:    "check the host, port, credentials and TLS options of its URI, and that this machine can reach it"}}
	}
	out := []finding{topologyFinding(subject, info, used)}
	out = append(out, versionFinding(subject, info))
	out = append(out, p.fcvFinding(ctx, subject, client, info))
	out = append(out, clockFinding(subject, info))
	if info.mongos {
		out = append(out, p.shardedFindings(ctx, subject, uri, client)...)
	}
	return out
}

// topologyFinding: change streams (and ferry's leases, transactions)
// need a replica set, or a sharded cluster read through mongos.
func topologyFinding(subject string, info *serverInfo, used string) finding {
	f := finding{Subject: subject, Check: "topology", Result: checkPass}
	switch {
	case info.setName != "":
		f.Detail = fmt.Sprintf("replica set %s (%s)", info.setName, used)
	case info.mongos:
		f.Detail = fmt.Sprintf("sharded cluster, through mongos (%s)", used)
	default:
		f.Result = checkFail
		f.Detail = fmt.Sprintf("a standalone server (%s): change streams, transactions and ferry's leases need a replica set or a sharded cluster", used)
		f.Fix = "run it as a replica set, even of one member: start mongod with --replSet rs0 and run rs.initiate() once"
	}
	return f
}

// versionFinding judges the release: the Go driver needs 4.4, Ferry
// targets 6.0 (pre- and post-images, showExpandedEvents, wallTime) and
// splits large events from 7.0 and 6.0.9.
func versionFinding(subject string, info *serverInfo) finding {
	f := finding{Subject: subject, Check: "version", Result: checkPass, Detail: "MongoDB " + info.version}
	switch {
	case !info.atLeast(4, 4):
		f.Result, f.Detail = checkFail, fmt.Sprintf("MongoDB %s: the Go driver ferry uses needs 4.4 or later", info.version)
		f.Fix = "upgrade the server to 6.0 or later"
	case !info.atLeast(6, 0):
		f.Result = checkWarn
		f.Detail = fmt.Sprintf("MongoDB %s: ferry targets 6.0+; this release has no pre- and post-images, no showExpandedEvents and no $changeStreamSplitLargeEvent (the rows below say what the configuration needs)", info.version)
		f.Fix = "upgrade to 7.0 or later (6.0.9+ at least)"
	case !info.hasSplitStage():
		f.Detail += " (no $changeStreamSplitLargeEvent before 6.0.9 and 7.0)"
	}
	return f
}

// fcvFinding reads the featureCompatibilityVersion: features of the
// release stay off until it is raised.
func (p *preflight) fcvFinding(ctx context.Context, subject string, client *mongo.Client, info *serverInfo) finding {
	ctx, cancel := context.WithTimeout(ctx, p.opts.timeout)
	defer cancel()
	f := finding{Subject: subject, Check: "featureCompatibilityVersion"}
	var reply struct {
		FCV struct {
			Version string `bson:"version"`
		} `bson:"featureCompatibilityVersion"`
	}
	err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}}).Decode(&reply)
	if err != nil {
		f.Result, f.Detail = checkWarn, fmt.Sprintf("could not read it (getParameter): %v", err)
		f.Fix = "nothing to do if the release's features work (the rows below try them); a user with clusterMonitor can read it"
		return f
	}
	v := append(append([]int32(nil), info.versionArray...), 0, 0)
	release := fmt.Sprintf("%d.%d", v[0], v[1])
	f.Detail = reply.FCV.Version
	if info.mongos || reply.FCV.Version == release {
		f.Result = checkPass
		return f
	}
	f.Result = checkWarn
	f.Detail = fmt.Sprintf("%s on MongoDB %s: the features new in %s stay off until it is raised", reply.FCV.Version, info.version, release)
	f.Fix = fmt.Sprintf("once the upgrade is final: db.adminCommand({setFeatureCompatibilityVersion: %q, confirm: true})", release)
	return f
}

// Clock offsets: ferry's leases are judged by the server's clock alone
// (package lease), so no offset endangers ownership; but the lag and
// checkpoint-age metrics, start_at times, verify's -since and the oplog
// window ferry reports compare server times with this machine's.
const (
	clockWarn = time.Second
	clockFail = 30 * time.Second
)

// clockFinding compares the server's clock (hello's localTime, read
// between two readings of this machine's) with this machine's.
func clockFinding(subject string, info *serverInfo) finding {
	f := finding{Subject: subject, Check: "clock"}
	rtt := info.received.Sub(info.sent)
	local := info.sent.Add(rtt / 2)
	server, precision := info.localTime, time.Millisecond
	if server.IsZero() {
		server, precision = time.Unix(int64(info.opTime.T), 0), time.Second
	}
	if server.Unix() <= 0 {
		f.Result, f.Detail = checkWarn, "the server did not say its time (no localTime nor operationTime in hello)"
		return f
	}
	offset := server.Sub(local)
	margin := rtt/2 + precision
	off := max(time.Duration(math.Abs(float64(offset)))-margin, 0)
	dir := "ahead of"
	if offset < 0 {
		dir = "behind"
	}
	f.Detail = fmt.Sprintf("server clock %v %s this machine's (±%v)", time.Duration(math.Abs(float64(offset))).Round(time.Millisecond), dir, margin.Round(time.Millisecond))
	switch {
	case off > clockFail:
		f.Result = checkFail
	case off > clockWarn:
		f.Result = checkWarn
	default:
		f.Result = checkPass
		return f
	}
	f.Detail += ": leases are safe (the server's clock alone decides them), but lag, checkpoint age, start_at times and verify windows are off by as much"
	f.Fix = "synchronise both clocks with NTP (chrony, systemd-timesyncd)"
	return f
}

// uriHosts is the host list of a connection string, without credentials
// (a password's "/" or "@" is percent-encoded in a valid one).
func uriHosts(uri config.MongoURI) string {
	_, s, _ := strings.Cut(uri.Reveal(), "://")
	if i := strings.IndexAny(s, "/?"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// serverCode is err's server error code (0: not a server error).
func serverCode(err error) int32 {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code
	}
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		return int32(we.WriteErrors[0].Code)
	}
	return 0
}

// isUnauthorized reports whether err is Unauthorized (13).
func isUnauthorized(err error) bool { return serverCode(err) == mongoerr.CodeUnauthorized }
