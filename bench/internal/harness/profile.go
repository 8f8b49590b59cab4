// This file starts and stops CPU profiles, for -cpuprofile and the like:
// to find where a row's time goes (go tool pprof).

package harness

import (
	"os"
	"runtime/pprof"
)

// CPUProfile starts a CPU profile written to path, and returns the function
// that stops it and closes the file; with path "", it starts nothing and
// stop returns nil. Only one CPU profile runs at a time in a process: it
// fails if another is running.
func CPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
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
