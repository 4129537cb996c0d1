package unified

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// serverInfo is what runOnRequirements are evaluated against.
type serverInfo struct {
	version  [3]int
	topology string // single, replicaset, sharded, load-balanced
	auth     bool
	mechs    []string // authenticationMechanisms, when known

	internal *mongo.Client
	mu       sync.Mutex
	params   map[string]paramValue
}

type paramValue struct {
	v   bson.RawValue
	err error
}

func (s *serverInfo) versionString() string {
	return fmt.Sprintf("%d.%d.%d", s.version[0], s.version[1], s.version[2])
}

// probeServer asks the server for its version (buildInfo versionArray) and
// topology (hello).
func probeServer(ctx context.Context, internal *mongo.Client, uri string) (*serverInfo, error) {
	s := &serverInfo{internal: internal, params: map[string]paramValue{}}
	admin := internal.Database("admin")
	var bi bson.Raw
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&bi); err != nil {
		return nil, fmt.Errorf("buildInfo: %w", err)
	}
	if va, ok := lookupArray(bi, "versionArray"); ok {
		vals, _ := va.Values()
		for i := 0; i < 3 && i < len(vals); i++ {
			n, ok := asInt64(vals[i])
			if !ok {
				return nil, fmt.Errorf("buildInfo: versionArray[%d] is %s", i, vals[i].Type)
			}
			s.version[i] = int(n)
		}
	} else if v := lookupString(bi, "version"); v != "" {
		parsed, err := parseVersion(v)
		if err != nil {
			return nil, fmt.Errorf("buildInfo: %w", err)
		}
		s.version = parsed
	} else {
		return nil, fmt.Errorf("buildInfo: no versionArray or version in %s", showDoc(bi))
	}
	var hello bson.Raw
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	co := options.Client().ApplyURI(uri)
	if err := co.Validate(); err != nil {
		return nil, err
	}
	s.auth = co.Auth != nil && (co.Auth.Username != "" || co.Auth.AuthMechanism != "")
	switch {
	case co.LoadBalanced != nil && *co.LoadBalanced:
		s.topology = "load-balanced"
	case lookupString(hello, "msg") == "isdbgrid":
		s.topology = "sharded"
	case lookupString(hello, "setName") != "":
		s.topology = "replicaset"
	default:
		s.topology = "single"
	}
	return s, nil
}

func lookupArray(d bson.Raw, key string) (bson.RawArray, bool) {
	v, err := d.LookupErr(key)
	if err != nil {
		return nil, false
	}
	return v.ArrayOK()
}

func lookupString(d bson.Raw, key string) string {
	v, err := d.LookupErr(key)
	if err != nil {
		return ""
	}
	s, _ := v.StringValueOK()
	return s
}

// unmet returns "" when any one of reqs is satisfied (or reqs is empty),
// else the reason the first one is not.
func (s *serverInfo) unmet(ctx context.Context, reqs []Requirement) string {
	first := ""
	for _, r := range reqs {
		why := s.unmetOne(ctx, r)
		if why == "" {
			return ""
		}
		if first == "" {
			first = why
		}
	}
	return first
}

func (s *serverInfo) unmetOne(ctx context.Context, r Requirement) string {
	if r.MinServerVersion != "" {
		v, _ := parseVersion(r.MinServerVersion)
		if compareVersions(s.version, v) < 0 {
			return fmt.Sprintf("requires minServerVersion %s; server is %s", r.MinServerVersion, s.versionString())
		}
	}
	if r.MaxServerVersion != "" {
		v, _ := parseVersion(r.MaxServerVersion)
		if compareVersions(s.version, v) > 0 {
			return fmt.Sprintf("requires maxServerVersion %s; server is %s", r.MaxServerVersion, s.versionString())
		}
	}
	if len(r.Topologies) > 0 && !s.topologyIn(r.Topologies) {
		return fmt.Sprintf("requires topology %s; server is %s", strings.Join(r.Topologies, " or "), s.topology)
	}
	if r.Serverless == "require" {
		return "requires serverless; server is not serverless"
	}
	if r.Auth != nil && *r.Auth != s.auth {
		if *r.Auth {
			return "requires auth; connection has no credentials"
		}
		return "requires no auth; connection has credentials"
	}
	if r.AuthMechanism != "" {
		return fmt.Sprintf("requires authMechanism %s; the runner does not check mechanisms", r.AuthMechanism)
	}
	if r.CSFLE != nil && *r.CSFLE {
		return "requires csfle; this build has no libmongocrypt"
	}
	if r.ServerParameters != nil {
		elems, _ := r.ServerParameters.Elements()
		for _, e := range elems {
			got, err := s.param(ctx, e.Key())
			if err != nil {
				return fmt.Sprintf("requires server parameter %s = %s; getParameter failed: %v", e.Key(), show(e.Value()), err)
			}
			if !sameValue(e.Value(), got) {
				return fmt.Sprintf("requires server parameter %s = %s; server has %s", e.Key(), show(e.Value()), show(got))
			}
		}
	}
	return ""
}

func (s *serverInfo) topologyIn(ts []string) bool {
	for _, t := range ts {
		switch {
		case t == s.topology:
			return true
		case t == "sharded-replicaset" && s.topology == "sharded":
			// Every shard of a supported server version is a replica set.
			return true
		}
	}
	return false
}

// param fetches one server parameter once per file.
func (s *serverInfo) param(ctx context.Context, name string) (bson.RawValue, error) {
	s.mu.Lock()
	p, ok := s.params[name]
	s.mu.Unlock()
	if ok {
		return p.v, p.err
	}
	var reply bson.Raw
	err := s.internal.Database("admin").RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: name, Value: 1}}).Decode(&reply)
	if err == nil {
		p.v, err = reply.LookupErr(name)
		if err != nil {
			err = fmt.Errorf("parameter %s not in reply", name)
		}
	}
	p.err = err
	s.mu.Lock()
	s.params[name] = p
	s.mu.Unlock()
	return p.v, p.err
}

func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
