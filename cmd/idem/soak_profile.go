// This file writes heap profiles of the chaos process during a soak
// (-heap-profiles): one at the first sample after the warm-up and one at the
// end, so that `go tool pprof -base PREFIX-heap-1.pprof PREFIX-heap-2.pprof`
// names the allocation sites whose live bytes grew over the run.

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// soakWarmUp is when the first heap profile is taken: once the journal and
// the key stores hold a full retention of settled payments, and after the
// first two minutes whatever the retention.
func (sc *soakConfig) soakWarmUp() time.Duration {
	return max(2*time.Minute, sc.retention+time.Minute)
}

// writeHeapProfile collects garbage, so the profile is of what is live now,
// and writes the heap profile to PREFIX-heap-n.pprof.
func writeHeapProfile(prefix string, n int) error {
	path := fmt.Sprintf("%s-heap-%d.pprof", prefix, n)
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("soak: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	fmt.Printf("  soak: heap profile %s\n", path)
	return nil
}
