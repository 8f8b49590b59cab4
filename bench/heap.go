// This file holds the heap sampler behind the resume figure's peak heap:
// runtime.MemStats.HeapInuse read every 10 ms while Resume runs; and the
// allocation counts of its passes and sends.

package main

import (
	"fmt"
	"runtime"
	"time"
)

// sampleHeap starts sampling HeapInuse every interval; the returned function
// stops sampling and returns the largest value seen, in bytes.
func sampleHeap(interval time.Duration) (stop func() uint64) {
	quit, done := make(chan struct{}), make(chan uint64)
	go func() {
		var ms runtime.MemStats
		var peak uint64
		read := func() {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
		read()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				read()
			case <-quit:
				read()
				done <- peak
				return
			}
		}
	}()
	return func() uint64 {
		close(quit)
		return <-done
	}
}

// heapInuse returns HeapInuse after a collection: the live heap's footprint.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// allocs counts this process's allocations: runtime.MemStats Mallocs and
// TotalAlloc.
type allocs struct{ n, bytes uint64 }

func allocsNow() allocs {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return allocs{ms.Mallocs, ms.TotalAlloc}
}

// since returns the allocations made from a to now.
func (a allocs) since() allocs {
	now := allocsNow()
	return allocs{now.n - a.n, now.bytes - a.bytes}
}

// perOp prints a shared among n operations: allocations and bytes each.
func (a allocs) perOp(n int) string {
	n = max(n, 1)
	return fmt.Sprintf("%.1f allocations, %d B", float64(a.n)/float64(n), a.bytes/uint64(n))
}
