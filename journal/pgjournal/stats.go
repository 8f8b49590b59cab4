// This file holds Stats: what a Journal has asked of PostgreSQL, counted
// where it asks it.

package pgjournal

import "sync/atomic"

// Stats counts a Journal's work since Open.
type Stats struct {
	// WriteAheads is how many operations Create wrote.
	WriteAheads uint64
	// Commits is how many transactions it committed, each waiting for
	// the WAL flush: a batch of write-aheads (with the settles riding it),
	// a durable update, a lease taken or given up, a batch of settles
	// written on its own.
	Commits uint64
	// FencedSettles is how many deferred settles changed nothing when
	// written: another instance had taken the operation over (its epoch
	// moved on, or it leases the row), so that instance's outcome stands,
	// or a sealed record was no longer pending. Update returned nil for
	// them (ErrFenced is reported only by a synchronous Update).
	FencedSettles uint64
}

// stats are the counters behind Stats.
type stats struct {
	writeAheads, commits, fencedSettles atomic.Uint64
}

// Stats returns the Journal's counters. It is safe for concurrent use.
func (j *Journal) Stats() Stats {
	return Stats{WriteAheads: j.stats.writeAheads.Load(), Commits: j.stats.commits.Load(),
		FencedSettles: j.stats.fencedSettles.Load()}
}
