package mongotest

import (
	"bytes"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Waiting reports how many commands wait for a session another command has
// checked out, and how many wait for a transaction to end, so that tests
// can wait for a command to be parked without sleeping.
func Waiting(s *Server) (onSession, onTxn int) {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	return s.eng.sessionWaits, s.eng.txnWaits
}

// ScanOnly turns the _id index path off (true) or back on, so that tests and
// benchmarks can compare it with the collection scan it replaces.
func ScanOnly(s *Server, on bool) {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	s.eng.idScanOnly = on
}

// StreamWindow sets how many oplog entries a change-stream getMore copies
// under the engine lock at a time (default 4096), so that tests can make
// batches span many windows.
func StreamWindow(s *Server, n int) {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	s.eng.streamWindow = n
}

// StoredEncodingErrors checks every stored version of every collection:
// its encoding (record.raw, version.raw), which reads copy into their
// replies, must be its document's, byte for byte, since the emulator
// never changes a stored document in place. It returns what differs.
func StoredEncodingErrors(s *Server) []string {
	e := s.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	check := func(c *collection, what string, doc bson.D, raw bson.Raw) {
		if doc == nil {
			return
		}
		want, err := bson.Marshal(doc)
		switch {
		case err != nil && raw != nil:
			out = append(out, fmt.Sprintf("%s: %s: an encoding kept for a document with none (%v)", c.ns(), what, err))
		case err == nil && !bytes.Equal(want, raw):
			out = append(out, fmt.Sprintf("%s: %s: the kept encoding %v is not the document's %v", c.ns(), what, raw, bson.Raw(want)))
		}
	}
	for _, d := range e.dbs {
		for _, c := range d.colls {
			for _, rec := range c.records {
				if rec == nil {
					continue
				}
				check(c, "record", rec.doc, rec.raw)
				for _, v := range rec.history {
					check(c, "kept version", v.doc, v.raw)
				}
			}
		}
	}
	return out
}
