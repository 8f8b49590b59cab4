// This file holds the child's CPU profile (Config.CPUProfile): one profile
// of the whole phase, each request's samples labelled with its row, so that
// one run profiles every row and pprof's -tagfocus picks one.

package serverbench

import (
	"context"
	"net/http"
	"os"
	"runtime/pprof"
)

// startProfile starts a CPU profile written to path; stop ends it and closes
// the file.
func startProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// labelled runs h with the profiler label row=name, which the goroutines it
// starts inherit.
func labelled(name string, h http.Handler) http.Handler {
	labels := pprof.Labels("row", name)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), labels, func(ctx context.Context) { h.ServeHTTP(w, r.WithContext(ctx)) })
	})
}

// noProfile is stop when no profile was asked for.
func noProfile() error { return nil }
