package mongotest

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
