// This file holds -cpuprofile and -memprofile, profiles of the client side
// during the rounds, and -resume-cpuprofile, one of the warm Resume: to find
// where a journaled call's or a resumed operation's time and allocations go
// (go tool pprof -tagfocus 'row=idem POST' ...: each window labels its row).

package main

import (
	"errors"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/idem-go/idem/bench/internal/harness"
)

// startProfiles starts what cfg asks for and returns the function that
// writes the profiles.
func startProfiles(cfg config) (stop func() error, err error) {
	stopCPU, err := harness.CPUProfile(cfg.cpuProfile)
	if err != nil {
		return nil, err
	}
	if cfg.memProfile != "" {
		runtime.MemProfileRate = 1
	}
	return func() error {
		errs := []error{stopCPU()}
		if cfg.memProfile != "" {
			f, err := os.Create(cfg.memProfile)
			if err != nil {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		return errors.Join(errs...)
	}, nil
}
