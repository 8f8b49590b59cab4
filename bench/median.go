// This file holds the client phase's own statistics over rounds, beside
// harness's medians: allocation counts and the latency quantiles of a
// sample.

package main

import (
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
)

// overAllocs is harness.Over for allocation counts, each median taken on
// its own.
func overAllocs[T any](rounds []T, f func(T) allocs) allocs {
	return allocs{uint64(harness.Over(rounds, func(x T) float64 { return float64(f(x).n) })),
		uint64(harness.Over(rounds, func(x T) float64 { return float64(f(x).bytes) }))}
}

func p50(s *sample) float64 { return float64(s.hist.quantile(0.50)) }
func p99(s *sample) float64 { return float64(s.hist.quantile(0.99)) }

func asDuration(ns float64) time.Duration { return time.Duration(ns) }
