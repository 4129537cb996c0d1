package mongotest

// Waiting reports how many commands wait for a session another command has
// checked out, and how many wait for a transaction to end, so that tests
// can wait for a command to be parked without sleeping.
func Waiting(s *Server) (onSession, onTxn int) {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	return s.eng.sessionWaits, s.eng.txnWaits
}
