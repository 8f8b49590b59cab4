// This file holds the statistics: medians over rounds, of single figures and
// of per-round ratios and differences between two clients.

package main

import (
	"slices"
	"time"
)

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// over returns the median over rounds of f applied to each round's figure
// (a client's sample, a resume pass).
func over[T any](rounds []T, f func(T) float64) float64 {
	xs := make([]float64, len(rounds))
	for i, x := range rounds {
		xs[i] = f(x)
	}
	return median(xs)
}

// overDur is over for durations.
func overDur[T any](rounds []T, f func(T) time.Duration) time.Duration {
	return time.Duration(over(rounds, func(x T) float64 { return float64(f(x)) }))
}

// overAllocs is over for allocation counts, each median taken on its own.
func overAllocs[T any](rounds []T, f func(T) allocs) allocs {
	return allocs{uint64(over(rounds, func(x T) float64 { return float64(f(x).n) })),
		uint64(over(rounds, func(x T) float64 { return float64(f(x).bytes) }))}
}

// paired returns the median over rounds of f(a, b) for the two clients'
// samples of the same round.
func paired(a, b []*sample, f func(a, b *sample) float64) float64 {
	xs := make([]float64, len(a))
	for i := range a {
		xs[i] = f(a[i], b[i])
	}
	return median(xs)
}

func p50(s *sample) float64 { return float64(s.hist.quantile(0.50)) }
func p99(s *sample) float64 { return float64(s.hist.quantile(0.99)) }

func asDuration(ns float64) time.Duration { return time.Duration(ns) }
