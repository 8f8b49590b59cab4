// This file counts, for the chaos run on a fleet (chaos_fleet.go), the
// operations that survivors adopted from dead processes, and how long after
// the death each was sent again. An operation counts when a killed process
// had sent it at least once, without a final answer, and another process
// later sends it with the same idempotency key: the delay runs from the
// SIGKILL to that attempt, and covers the lease running out and a resumer
// finding the row.

package main

import (
	"strconv"
	"time"
)

// adoption is the fleet's count of adoptions. The fleet's mu guards it.
type adoption struct {
	done     map[string]bool      // references with a final answer
	lastBy   map[string]attemptBy // the newest attempt of each reference
	orphans  map[string]orphan    // left by a killed process, not yet sent again
	adopted  int
	byOther  int // adopted by another worker slot, not the dead one's next life
	worst    time.Duration
	worstRef string
}

type attemptBy struct {
	proc string
	slot int
	key  string
}

type orphan struct {
	attemptBy
	killedAt time.Time
}

func newAdoption() adoption {
	return adoption{done: map[string]bool{}, lastBy: map[string]attemptBy{}, orphans: map[string]orphan{}}
}

// attempt notes that process proc, of slot, sent ref with key at the
// worker's clock unixNano.
func (f *fleet) attempt(proc string, slot int, ref, key, unixNano string) {
	ns, err := strconv.ParseInt(unixNano, 10, 64)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.orphans[ref]; ok && o.proc != proc && o.key == key {
		delete(f.orphans, ref)
		f.adopted++
		if o.slot != slot {
			f.byOther++
		}
		if d := time.Unix(0, ns).Sub(o.killedAt); d > f.worst {
			f.worst, f.worstRef = d, ref
		}
	}
	f.lastBy[ref] = attemptBy{proc: proc, slot: slot, key: key}
}

// settled notes a final answer for ref.
func (f *fleet) settled(ref string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done[ref] = true
	delete(f.orphans, ref)
}

// orphan notes that process proc was SIGKILLed at killedAt, once its
// output is read to the end: what it sent last and no one settled since
// waits for adoption.
func (f *fleet) orphan(proc string, slot int, killedAt time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ref, a := range f.lastBy {
		if a.proc == proc && !f.done[ref] {
			f.orphans[ref] = orphan{attemptBy: a, killedAt: killedAt}
		}
	}
}

func (f *fleet) settledCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.done)
}
