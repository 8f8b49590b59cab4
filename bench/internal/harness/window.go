// This file runs the goroutines of one measured window: c of them call the
// row's request back to back until the window's time is up. What is read
// around the window (allocations, CPU, counters) and how latencies are kept
// stay with the caller.

package harness

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Workers is the goroutines of one window, prepared before the window opens
// so that nothing the harness allocates for them is counted in it. It is
// used by one window at a time.
type Workers struct {
	tallies []tally
}

// tally is one goroutine's failures.
type tally struct {
	errors   uint64
	firstErr error
}

// NewWorkers prepares c goroutines (c >= 1).
func NewWorkers(c int) *Workers { return &Workers{tallies: make([]tally, c)} }

// Run starts the goroutines at once. Goroutine i calls do back to back and
// passes the latency of each call that returned nil to ok(i, latency); ok is
// called by goroutine i alone, so per-goroutine state indexed by i needs no
// lock. They stop after d, or when ctx ends, each finishing its call in
// flight. Run returns the time from the start until the last one returned.
func (ws *Workers) Run(ctx context.Context, d time.Duration, do func(context.Context) error, ok func(i int, latency time.Duration)) time.Duration {
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for i := range ws.tallies {
		t := &ws.tallies[i]
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				t0 := time.Now()
				if err := do(ctx); err != nil {
					if t.errors == 0 {
						t.firstErr = err
					}
					t.errors++
					continue
				}
				ok(i, time.Since(t0))
			}
		})
	}
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	stop.Store(true)
	wg.Wait()
	return time.Since(start)
}

// Errors returns how many calls failed in the last Run, and the first
// failure of the lowest-numbered goroutine that had one.
func (ws *Workers) Errors() (n uint64, first error) {
	for _, t := range ws.tallies {
		n += t.errors
		if first == nil {
			first = t.firstErr
		}
	}
	return n, first
}

// NoteFailures writes a line to w if name failed any calls over its rounds, with the
// first failure; failed reads one round's count and first failure. A row that failed
// nothing writes nothing.
func NoteFailures[T any](w io.Writer, name string, rounds []T, failed func(T) (uint64, error)) {
	var n uint64
	var first error
	for _, r := range rounds {
		k, err := failed(r)
		n += k
		if first == nil {
			first = err
		}
	}
	if n > 0 {
		fmt.Fprintf(w, "  note: %s had %d failed requests, not counted above (first: %v)\n", name, n, first)
	}
}
