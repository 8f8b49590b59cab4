//go:build unix

// cputime_unix_test.go: the CPU time the test process has used, for benchmarks that report
// CPU per operation on a machine other work shares (wall time per operation then measures
// the queue for the CPU, not the code).

package server_test

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
