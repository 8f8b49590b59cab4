// This file holds the report's commit table: what one group commit costs
// idem's journal beside the floor's at each concurrency, split into the
// disk's share (bbolt writing and fsyncing pages) and the CPU's (building
// the transaction and laying out its pages). Where commits run back to
// back, their length sets how long a write-ahead waits.

package main

import (
	"fmt"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
)

// commits prints, for idem POST and floor POST at each concurrency, how
// often the journal committed, how much each commit carried and wrote, and
// where its time went.
func (r *report) commits() {
	rows := []string{"idem POST", floorRow, contractRow}
	r.printf("\ncommits under load (per commit, medians over rounds: Journal().Stats() for idem, the same counters for the floor)\n")
	r.printf("%-6s %-19s %17s %11s %13s %14s %12s %9s\n", "", "client", "one commit every", "ops/commit", "pages/commit",
		"in the commit", "write+fsync", "the rest")
	for _, lvl := range r.levels {
		for i, name := range rows {
			ss := lvl.byClient[rowIndex(r.rows, name)]
			perCommit := func(f func(journalCounts) float64) float64 {
				return harness.Over(ss, func(s *sample) float64 { return s.perCommit(f(s.counts)) })
			}
			every := harness.Over(ss, func(s *sample) float64 { return s.perCommit(float64(s.elapsed)) })
			level := ""
			if i == 0 {
				level = fmt.Sprintf("c=%d", lvl.conc)
			}
			in := perCommit(func(c journalCounts) float64 { return float64(c.commitTime) })
			write := perCommit(func(c journalCounts) float64 { return float64(c.writeTime) })
			rest := perCommit(func(c journalCounts) float64 { return float64(c.commitTime - c.writeTime) })
			r.printf("%-6s %-19s %17s %11.1f %13.2f %14s %12s %9s\n", level, name,
				fmtDur(time.Duration(every)),
				perCommit(func(c journalCounts) float64 { return float64(c.writeAheads) }),
				perCommit(func(c journalCounts) float64 { return float64(c.pages) }),
				fmtDur(time.Duration(in)), fmtDur(time.Duration(write)), fmtDur(time.Duration(rest)))
		}
	}
	r.printf("       in the commit: wall time from asking for bbolt's writer lock to the return of the\n")
	r.printf("       second fsync; write+fsync: bbolt's TxStats.WriteTime (pages written, then synced, meta\n")
	r.printf("       included); the rest: the CPU's share (building the transaction, spilling its pages),\n")
	r.printf("       and any wait for bbolt's writer lock (the journal's prune takes it every ten minutes).\n")
}
