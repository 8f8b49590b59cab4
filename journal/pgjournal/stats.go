// This file holds Stats: what a Journal has asked of PostgreSQL, counted
// where it asks it.

package pgjournal

import "sync/atomic"

// Stats counts a Journal's work since Open.
type Stats struct {
	// WriteAheads is how many operations Create wrote.
	WriteAheads uint64
	// Commits is how many transactions it committed that wait for the WAL
	// flush: a batch of write-aheads, a durable update, a lease taken or
	// given up, a flush of deferred settles. A deferred settle, which
	// does not wait, is not one.
	Commits uint64
}

// stats are the counters behind Stats.
type stats struct {
	writeAheads, commits atomic.Uint64
}

// Stats returns the Journal's counters. It is safe for concurrent use.
func (j *Journal) Stats() Stats {
	return Stats{WriteAheads: j.stats.writeAheads.Load(), Commits: j.stats.commits.Load()}
}
