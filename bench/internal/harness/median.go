// This file holds the statistics over rounds: the median of single figures,
// and of per-round ratios or differences between two rows of the same round.

package harness

import (
	"slices"
	"time"
)

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. xs is not changed.
func Median(xs []float64) float64 {
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

// Over returns the median over rounds of f applied to each round's figure.
func Over[T any](rounds []T, f func(T) float64) float64 {
	xs := make([]float64, len(rounds))
	for i, x := range rounds {
		xs[i] = f(x)
	}
	return Median(xs)
}

// OverDur is Over for durations.
func OverDur[T any](rounds []T, f func(T) time.Duration) time.Duration {
	return time.Duration(Over(rounds, func(x T) float64 { return float64(f(x)) }))
}

// Paired returns the median over rounds of f(a[i], b[i]): two rows measured
// in the same round i, so that a ratio or difference of the pair does not
// carry the drift between rounds. a and b have one figure per round each;
// rounds beyond the shorter are left out.
func Paired[T any](a, b []T, f func(a, b T) float64) float64 {
	xs := make([]float64, min(len(a), len(b)))
	for i := range xs {
		xs[i] = f(a[i], b[i])
	}
	return Median(xs)
}
