// This file holds the callClock: from the worker processes' event lines (worker.go) it
// counts the payments that got their final answer and times the slowest, from the
// "start" of its call to that answer, so the nemesis (nemesis.go) can say what a fault
// did to the payments while it lasted, as the client sees them.

package main

import (
	"strconv"
	"sync"
	"time"
)

// callClock measures the payments' calls. A nil *callClock measures nothing. It is safe
// for concurrent use.
type callClock struct {
	mu      sync.Mutex
	started map[string]time.Time // by operation: its call's latest start
	settled int                  // since take
	slowest time.Duration        // since take
}

func newCallClock() *callClock { return &callClock{started: map[string]time.Time{}} }

// observe reads one event line's fields: "start OPID UNIXNANO" starts a call; "settled
// OPID STATUS …" or "resumed OPID STATUS …" ends one with its final answer, now.
func (c *callClock) observe(fields []string) {
	if c == nil || len(fields) < 3 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch op := fields[1]; {
	case fields[0] == "start":
		if ns, err := strconv.ParseInt(fields[2], 10, 64); err == nil {
			c.started[op] = time.Unix(0, ns)
		}
	case (fields[0] == "settled" || fields[0] == "resumed") && isStatus(fields[2]):
		c.settled++
		if t, ok := c.started[op]; ok {
			c.slowest = max(c.slowest, time.Since(t))
			delete(c.started, op)
		}
	}
}

// take returns how many payments got their final answer since the last take, and the
// slowest of their calls; one resumed by another process (after a SIGKILL) counts from
// its latest "start", in whichever process that was.
func (c *callClock) take() (settled int, slowest time.Duration) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	settled, slowest = c.settled, c.slowest
	c.settled, c.slowest = 0, 0
	return settled, slowest
}
