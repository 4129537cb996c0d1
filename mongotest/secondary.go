package mongotest

import (
	"fmt"
	"net"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Secondaries. A Server started with Secondaries(n) is a replica set of
// one primary and n secondaries, each on its own port. A secondary applies
// every write as the primary commits it (no replication lag), so it
// serves reads of the same data; like a real secondary it refuses writes
// and transactions with NotWritablePrimary (10107), and reads that do not
// allow secondaries (no $readPreference, or primary) with
// NotPrimaryNoSecondaryOk (13435). Drivers discover the secondaries from
// the primary's hello, so the URI stays the primary's.

// Secondaries makes the server a replica set with n secondaries besides
// its primary (default 0). Reads with a secondary read preference then
// have a member to select, as on a production replica set, and w: n+1 is
// the largest write concern the set satisfies.
func Secondaries(n int) Option { return optionFunc(func(c *config) { c.secondaries = n }) }

func listenSecondaries(primary net.Listener, n int) ([]net.Listener, error) {
	host := "127.0.0.1"
	if h, _, err := net.SplitHostPort(primary.Addr().String()); err == nil {
		host = h
	}
	var out []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			for _, l := range out {
				l.Close()
			}
			return nil, fmt.Errorf("mongotest: listen for secondary %d: %w", i+1, err)
		}
		out = append(out, ln)
	}
	return out, nil
}

// SecondaryAddrs returns the addresses of the secondaries, in member order.
func (s *Server) SecondaryAddrs() []string {
	out := make([]string, len(s.secLns))
	for i, l := range s.secLns {
		out[i] = l.Addr().String()
	}
	return out
}

func (s *Server) memberAddr(member int) string {
	if member == 0 {
		return s.Addr()
	}
	return s.secLns[member-1].Addr().String()
}

// hosts lists the members for hello.
func (s *Server) hosts() bson.A {
	out := bson.A{s.Addr()}
	for _, a := range s.SecondaryAddrs() {
		out = append(out, a)
	}
	return out
}

// secondaryReads are the commands a secondary serves when the read
// preference allows a secondary.
var secondaryReads = map[string]bool{
	"find": true, "getMore": true, "killCursors": true, "aggregate": true, "count": true, "distinct": true,
	"listCollections": true, "listIndexes": true, "listDatabases": true, "dbStats": true, "collStats": true,
}

// secondaryAllows decides whether a secondary runs a command: anything
// that neither reads data nor writes (hello, ping, buildInfo, sessions...)
// runs; reads (aggregates with $out or $merge among them) need a read
// preference that allows secondaries; writes, transactions and fail points
// are refused.
func (e *engine) secondaryAllows(r *request) error {
	if r.autocommit != nil {
		return errorf(mongoerr.CodeNotWritablePrimary, "not primary: transactions run on the primary only")
	}
	switch {
	case r.name == "configureFailPoint":
		return errorf(mongoerr.CodeNotImplemented, "mongotest: fail points are set on the primary, not on a secondary")
	case secondaryReads[r.name]:
		// An aggregate ending with $out or $merge is a read too: since
		// 4.4 a secondary runs it, writing its output through the
		// primary (one engine here), when the read preference allows.
		rp, _ := lookupD(r.cmd, "$readPreference").(bson.D)
		if mode, _ := lookupD(rp, "mode").(string); mode == "" || strings.EqualFold(mode, "primary") {
			return errorf(mongoerr.CodeNotPrimaryNoSecondaryOk, "not primary and secondaryOk=false")
		}
	case isWriteCommand(r.name) || writeConcernCommands[r.name] || r.txnNumber != nil:
		return errorf(mongoerr.CodeNotWritablePrimary, "not primary")
	}
	return nil
}
