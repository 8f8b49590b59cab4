// Package harness holds what the bench's two phases share, the client phase
// (package main) and the server phase (package serverbench): the child
// process that serves the other side (child.go), this process's CPU time
// (cpu_*.go), CPU profiles (profile.go), the goroutines of one measured
// window (window.go), and medians over rounds (median.go).
package harness
