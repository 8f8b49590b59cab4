// This file prints the PostgreSQL section of the report, with -postgres:
// what idem over pgjournal, the PostgreSQL floor (pgfloor.go) and its
// contract floor (pgfloor_contract.go) asked of the server per operation at
// each concurrency.

package main

import (
	"fmt"

	"github.com/idem-go/idem/bench/internal/harness"
)

// postgres prints, for the three PostgreSQL rows at each concurrency,
// transactions, statements and round trips per operation (each row's own
// pgCounter) and the commits that waited for the WAL flush; the ratio of
// their req/s is in the ratio table (ratioDefs).
func (r *report) postgres() {
	if !hasRow(r.rows, pgRow) || !hasRow(r.rows, pgFloorRow) {
		return
	}
	r.printf("\nPostgreSQL per operation (medians over rounds; counted by a pgx tracer on each row's own pool)\n")
	r.printf("  %s: one committer writes every queued write-ahead in one INSERT … SELECT FROM unnest (synchronous_commit\n", pgFloorRow)
	r.printf("  on), the POST sent after its commit; the settle a DELETE riding the next INSERT, or committed %v later\n", pgFloorFlush)
	r.printf("  with synchronous_commit off; pool of %d connections. %s: pool of max(4, largest -c) connections.\n", pgFloorConns, pgRow)
	r.printf("  %s: the same committer, writing pgjournal's rows into pgjournal's table (its indexes, the record\n", pgContractRow)
	r.printf("  column, a lease), the settle an UPDATE that keeps the settled record, riding the next INSERT's transaction.\n")
	r.printf("%-6s %-16s %9s %10s %14s %15s %21s\n", "", "client", "req/s", "xacts/op", "statements/op", "round trips/op", "flush-waiting xacts/op")
	for _, lvl := range r.levels {
		for k, name := range []string{pgRow, pgFloorRow, pgContractRow} {
			ss := lvl.byClient[rowIndex(r.rows, name)]
			per := func(f func(pgCounts) uint64) float64 {
				return harness.Over(ss, func(s *sample) float64 { return s.perReq(f(s.pg)) })
			}
			level := ""
			if k == 0 {
				level = fmt.Sprintf("c=%d", lvl.conc)
			}
			r.printf("%-6s %-16s %9.0f %10.3f %14.3f %15.3f %21.3f\n", level, name, harness.Over(ss, (*sample).reqPerSec),
				per(func(c pgCounts) uint64 { return c.xacts }),
				per(func(c pgCounts) uint64 { return c.statements }),
				per(func(c pgCounts) uint64 { return c.roundTrips }),
				harness.Over(ss, func(s *sample) float64 { return s.perReq(s.counts.commits) }))
		}
	}
	r.printf("       xacts: transactions ended by a commit (read-only ones too); flush-waiting: pgjournal's Stats.Commits\n")
	r.printf("       for %s, the floors' INSERTs for the others. Per operation: ÷ the window's successful requests.\n", pgRow)
}
