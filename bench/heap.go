// This file holds the heap sampler behind the resume figure's peak heap:
// runtime.MemStats.HeapInuse read every 10 ms while Resume runs.

package main

import (
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
