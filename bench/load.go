// This file holds one measured window: c goroutines send requests back to back
// through one client for a fixed time, and the window's throughput, latency,
// allocations and journal commits are read around it. rounds.go runs the
// windows; report.go prints them.

package main

import (
	"context"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
)

// sample is what one window measured.
type sample struct {
	requests uint64 // completed without error
	errors   uint64
	firstErr error
	elapsed  time.Duration // from the start until the last worker returned
	hist     histogram     // latency of each successful request

	alloc      allocs        // this process's allocations over the window
	cpu        time.Duration // this process's user + system CPU time over the window
	counts     journalCounts // journal counter deltas (journaled rows)
	writeAhead histogram     // each write-ahead commit (journaled rows)
	pg         pgCounts      // the PostgreSQL rows' statements, transactions, round trips
}

func (s *sample) reqPerSec() float64 { return float64(s.requests) / s.elapsed.Seconds() }

func (s *sample) perReq(v uint64) float64 {
	if s.requests == 0 {
		return 0
	}
	return float64(v) / float64(s.requests)
}

// commitsPerOp is the journal's fsynced commits per journaled operation.
func (s *sample) commitsPerOp() float64 {
	if s.counts.writeAheads == 0 {
		return 0
	}
	return float64(s.counts.commits) / float64(s.counts.writeAheads)
}

// pagesPerCommit is the pages the journal wrote per commit, meta included.
func (s *sample) pagesPerCommit() float64 { return s.perCommit(float64(s.counts.pages)) }

// perCommit is v over the window ÷ the journal's commits in it; 0 if none.
func (s *sample) perCommit(v float64) float64 {
	if s.counts.commits == 0 {
		return 0
	}
	return v / float64(s.counts.commits)
}

// worker is one goroutine's latencies, prepared before the window opens so
// that nothing the harness allocates is counted in it.
type worker struct {
	hist     histogram
	requests uint64
}

// measure runs cl with c concurrent goroutines for d and returns the sample.
// Allocations are counted for the whole process, which holds only the client
// side: the server is a child process.
func measure(ctx context.Context, cl client, c int, d time.Duration) *sample {
	workers := make([]worker, c)
	ws := harness.NewWorkers(c)
	record := func(i int, lat time.Duration) {
		w := &workers[i]
		w.hist.record(lat)
		w.requests++
	}
	s := &sample{}

	runtime.GC()
	alloc0 := allocsNow()
	var counts0 journalCounts
	if cl.commits != nil {
		counts0 = cl.commits()
	}
	if cl.writeAheads != nil {
		cl.writeAheads.take() // this window's only
	}
	var pg0 pgCounts
	if cl.pg != nil {
		pg0 = cl.pg()
	}
	cpu0 := harness.ProcessCPU()
	// The row's label goes to the goroutines started under it (the workers,
	// and the connections they dial), so that -cpuprofile can be read per row.
	pprof.Do(ctx, pprof.Labels("row", cl.name), func(ctx context.Context) {
		s.elapsed = ws.Run(ctx, d, cl.do, record)
	})
	s.cpu = harness.ProcessCPU() - cpu0
	s.alloc = alloc0.since()
	if cl.commits != nil {
		s.counts = cl.commits().since(counts0)
	}
	if cl.pg != nil {
		s.pg = cl.pg().since(pg0)
	}
	if cl.writeAheads != nil {
		s.writeAhead = cl.writeAheads.take()
	}

	s.errors, s.firstErr = ws.Errors()
	for i := range workers {
		w := &workers[i]
		s.hist.merge(&w.hist)
		s.requests += w.requests
	}
	return s
}
