//go:build !unix

package main

import "time"

// processCPU is not measured here: cpu/req prints 0.
func processCPU() time.Duration { return 0 }
