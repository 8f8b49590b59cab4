// This file runs the interleaved rounds at one concurrency level: round 1
// measures every client once, then round 2, and so on, so that drift in the
// machine (page cache, CPU frequency, a neighbour) hits every client alike.
// The client order rotates each round so no client always runs first.

package main

import (
	"context"
	"fmt"
	"io"
)

// levelResult is every sample at one concurrency: byClient[i][r] is client i
// in round r.
type levelResult struct {
	conc     int
	byClient [][]*sample
	// floor[r] is the bare commit-then-POST path timed in round r, after the
	// clients, when runLevel was given a floor function (at c=1): the disk's
	// fsync latency drifts, so the added latency is compared with a commit
	// of the same minute.
	floor []floorSample
}

func runLevel(ctx context.Context, cfg config, rows []client, conc int, floor func() (floorSample, error), progress io.Writer) (*levelResult, error) {
	res := &levelResult{conc: conc, byClient: make([][]*sample, len(rows))}
	for i := range rows {
		res.byClient[i] = make([]*sample, cfg.rounds)
	}
	for r := range cfg.rounds {
		fmt.Fprintf(progress, "bench: concurrency %d, round %d/%d\n", conc, r+1, cfg.rounds)
		for k := range rows {
			i := (k + r) % len(rows)
			measure(ctx, rows[i], conc, cfg.warmup())
			s := measure(ctx, rows[i], conc, cfg.d)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if s.requests == 0 {
				return nil, fmt.Errorf("%s at concurrency %d: no request succeeded: %v", rows[i].name, conc, s.firstErr)
			}
			res.byClient[i][r] = s
		}
		if floor != nil {
			f, err := floor()
			if err != nil {
				return nil, fmt.Errorf("bbolt commit figure: %w", err)
			}
			res.floor = append(res.floor, f)
		}
	}
	return res, nil
}

// rowIndex finds a client's row by name.
func rowIndex(rows []client, name string) int {
	for i, r := range rows {
		if r.name == name {
			return i
		}
	}
	panic("bench: no row " + name)
}

// hasRow reports whether rows has a row named name.
func hasRow(rows []client, name string) bool {
	for _, r := range rows {
		if r.name == name {
			return true
		}
	}
	return false
}
