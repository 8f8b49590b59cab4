// Package leakcheck checks, in tests, that a test leaves no goroutine
// running: the packages of this module share it rather than each keeping
// a copy.
package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// Check fails tb if, after its cleanups (servers closed, idle connections
// dropped), more goroutines run than when it started. Call it first in a
// test, so that its cleanup runs last.
func Check(tb testing.TB) {
	tb.Helper()
	before := runtime.NumGoroutine()
	tb.Cleanup(func() {
		tb.Helper()
		now := Wait(before, 2*time.Second)
		if now > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			tb.Errorf("goroutines: %d before the test, %d after\n%s", before, now, buf)
		}
	})
}

// Wait waits up to limit for the goroutine count to drop to want and
// returns the last count: goroutines (a connection's, a timer's) exit
// asynchronously.
func Wait(want int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
