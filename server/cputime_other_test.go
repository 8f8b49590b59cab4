//go:build !unix

// cputime_other_test.go: processCPU where getrusage is missing reports nothing.

package server_test

import "time"

func processCPU() time.Duration { return 0 }
