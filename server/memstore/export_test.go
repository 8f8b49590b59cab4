package memstore

// Kept returns how many records and released tokens s holds, expired or not: what expiry
// has not deleted yet.
func (s *Store) Kept() (records, tokens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inUse, len(s.released)
}
