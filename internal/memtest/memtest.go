// Package memtest measures, for tests, how much heap memory a piece of work keeps alive
// at its peak: the bound behind "a body is never held twice" and the like.
package memtest

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// PeakDuring runs f after a collection and returns the most heap memory its objects took
// above that baseline, in bytes, sampled every 50 µs (dead objects not yet swept
// included, so an upper bound of what f kept alive).
func PeakDuring(f func()) float64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Microsecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return float64(peak.Load()) - float64(base)
}
