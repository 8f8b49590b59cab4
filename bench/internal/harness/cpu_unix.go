// This file reads this process's CPU time where getrusage exists.

//go:build unix

package harness

import (
	"syscall"
	"time"
)

// ProcessCPU is this process's user plus system CPU time so far (getrusage
// RUSAGE_SELF); 0 if it cannot be read. In the parent it is the client
// side's, in a server child the server's: each side runs in its own process.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
