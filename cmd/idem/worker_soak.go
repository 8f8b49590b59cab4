// This file holds the worker's side of a soak ("idem chaos -duration",
// soak.go): payments numbered on from where the last life left off until a
// deadline, rather than a fixed n, and the worker's own health figures,
// measured inside the process and printed as one line per interval:
//
//	stats HEAPINUSE GOROUTINES FILES PENDING COMMITS P50NS P99NS
//
// HEAPINUSE is runtime.MemStats.HeapInuse in bytes, FILES the entries of
// /proc/self/fd, PENDING the Observer's pending gauge, and COMMITS, P50NS and
// P99NS the write-ahead commits since the last line with their median and
// 99th percentile in nanoseconds (0 when there were none).

package main

import (
	"context"
	"iter"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem"
)

// soakOps yields the payments from from on, skipping those the journal shows
// settled, until the deadline, and past it those below n: the parent's count
// of payments started, which a killed life may have left unsent. Settled
// records older than the journal's retention are pruned, so from must be past
// every payment settled longer ago than that: the parent passes the first one
// it has not seen settled.
func (w *worker) soakOps(from, n int, until time.Time) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := from; i < n || time.Now().Before(until); i++ {
			if rec, err := w.client.Journal().Lookup(opID(i)); err == nil && rec != nil && rec.State == idem.StateSettled {
				continue
			}
			if !yield(i) {
				return
			}
		}
	}
}

// workerStats is the Observer that times write-ahead commits and keeps the
// pending gauge, for the stats lines. It is safe for concurrent use.
type workerStats struct {
	idem.NopObserver
	pending atomic.Int64
	mu      sync.Mutex
	commits []time.Duration // since the last line
}

func (s *workerStats) PendingChanged(delta int) { s.pending.Add(int64(delta)) }

func (s *workerStats) WriteAhead(_ context.Context, d time.Duration, err error) {
	if err != nil {
		return
	}
	s.mu.Lock()
	s.commits = append(s.commits, d)
	s.mu.Unlock()
}

// report prints a stats line every interval until ctx ends.
func (s *workerStats) report(ctx context.Context, out *lineWriter, every time.Duration) {
	tickUntil(ctx.Done(), every, func() {
		s.mu.Lock()
		commits := s.commits
		s.commits = make([]time.Duration, 0, len(commits))
		s.mu.Unlock()
		p := readProcStats()
		p50, p99 := percentiles(commits)
		out.printf("stats %d %d %d %d %d %d %d", p.heap, p.goroutines, p.files, s.pending.Load(), len(commits), p50, p99)
	})
}

// procStats is one process's health figures, read inside it.
type procStats struct {
	heap       uint64 // runtime.MemStats.HeapInuse, bytes
	goroutines int
	files      int // open file descriptors; -1 if /proc is not there
}

// readProcStats reads the calling process's figures. ReadMemStats stops the
// world briefly, which is fine every few seconds.
func readProcStats() procStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return procStats{heap: m.HeapInuse, goroutines: runtime.NumGoroutine(), files: openFiles()}
}

// openFiles counts the process's open descriptors, less the one that reads
// /proc/self/fd.
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1
}

// percentiles returns the median and the 99th percentile of ds (nearest
// rank), or zeros for none. It sorts ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	rank := func(p int) time.Duration { return ds[max((len(ds)*p+99)/100-1, 0)] }
	return rank(50), rank(99)
}
