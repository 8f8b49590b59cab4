//go:build unix

package serverbench

import (
	"syscall"
	"time"
)

// processCPU is this process's user plus system CPU time so far (getrusage
// RUSAGE_SELF): in the child, the server's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
