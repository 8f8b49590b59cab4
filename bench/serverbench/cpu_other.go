//go:build !unix

package serverbench

import "time"

// processCPU is not known here: cpu/req prints as 0.
func processCPU() time.Duration { return 0 }
