// This file labels the child's CPU profile (Config.CPUProfile, started by
// harness.CPUProfile): one profile of the whole phase, each request's samples
// labelled with its row, so that one run profiles every row and pprof's
// -tagfocus picks one.

package serverbench

import (
	"context"
	"net/http"
	"runtime/pprof"
)

// labelled runs h with the profiler label row=name, which the goroutines it
// starts inherit.
func labelled(name string, h http.Handler) http.Handler {
	labels := pprof.Labels("row", name)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), labels, func(ctx context.Context) { h.ServeHTTP(w, r.WithContext(ctx)) })
	})
}
