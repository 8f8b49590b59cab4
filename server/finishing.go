// finishing.go lets a copy that arrives while its key's handler has just returned on this
// instance wait for the record to be settled (completed or released, bounded by
// StoreTimeout) instead of getting 409: the window between the end of an answer and its
// completion.

package server

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// finishing holds the records whose handler returned here and whose settling has not been
// resolved, by a 64-bit hash of their Scope, in pointer-free entries: no allocation per
// request, and a map no larger than the settlings in flight. A settled note is dropped at
// once; a count of settlings stands in for it: a copy reads the count before its claim,
// and if its record has no note when it looks but the count moved, its record may have
// been settled meanwhile, and it claims again. Two Scopes whose hashes collide (a chance
// of 2^-64), or a count moved by another record, only cost a copy a wait or a claim it did
// not need, or a 409 instead of a wait: either way the Store decides. It is safe for
// concurrent use.
type finishing struct {
	mu      sync.Mutex
	seed    maphash.Seed
	recs    map[uint64]note          // unsettled notes, by the Scope's hash (finishing.hash)
	waiters map[uint64]chan struct{} // closed when the note of that hash is settled or replaced
	seq     uint64                   // the last note's number
	settled atomic.Uint64            // how many notes were settled (mark)
}

// note is one record being settled.
type note struct {
	seq    uint64
	waited bool // a copy waits on waiters[hash]
}

// settling is the handle of one note, to settle it once. The zero settling is no note.
type settling struct {
	f         *finishing
	hash, seq uint64
}

// What finishing.wait found.
const (
	notFinishing  = iota // no note, and nothing settled since the mark: claim as usual
	maybeSettled         // no note, but something was settled since the mark: claim again
	waitedSettled        // the record's note was settled while the copy waited
)

// hash returns sc's hash. Called with mu held, after add has made the seed.
func (f *finishing) hash(sc Scope) uint64 {
	return sc.Hash(f.seed)
}

// add notes that the record sc is being settled and returns the note's handle, whose
// settle is to be called once, when it is.
func (f *finishing) add(sc Scope) settling {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recs == nil {
		f.seed, f.recs, f.waiters = maphash.MakeSeed(), map[uint64]note{}, map[uint64]chan struct{}{}
	}
	h := f.hash(sc)
	if old, ok := f.recs[h]; ok && old.waited {
		f.wake(h) // its copies claim again, and find what the Store has
	}
	f.seq++
	f.recs[h] = note{seq: f.seq}
	return settling{f: f, hash: h, seq: f.seq}
}

// wake closes the channel the copies waiting on the note of hash h wait on. Called with
// mu held.
func (f *finishing) wake(h uint64) {
	close(f.waiters[h])
	delete(f.waiters, h)
}

// settle notes that s's record is settled, drops its note and wakes the copies waiting
// for it.
func (s settling) settle() {
	f := s.f
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settled.Add(1)
	n, ok := f.recs[s.hash]
	if !ok || n.seq != s.seq {
		return // replaced by a newer note of its hash: that one's copies wait on it
	}
	if n.waited {
		f.wake(s.hash)
	}
	delete(f.recs, s.hash)
}

// mark returns the count of settlings, for a copy to read before it sends its claim and
// to give wait.
func (f *finishing) mark() uint64 { return f.settled.Load() }

// wait waits, up to limit or until ctx ends, for the record sc to be settled if its
// handler returned here. It returns waitedSettled if it was; maybeSettled if sc has no
// note but a settling ended since mark was read (sc's may be one); else notFinishing.
func (f *finishing) wait(ctx context.Context, sc Scope, limit time.Duration, mark uint64) int {
	f.mu.Lock()
	if f.recs == nil {
		f.mu.Unlock()
		return notFinishing
	}
	h := f.hash(sc)
	n, ok := f.recs[h]
	if !ok {
		f.mu.Unlock()
		if f.settled.Load() != mark {
			return maybeSettled
		}
		return notFinishing
	}
	done := f.waiters[h]
	if !n.waited {
		done = make(chan struct{})
		f.waiters[h] = done
		n.waited = true
		f.recs[h] = n
	}
	f.mu.Unlock()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
		return waitedSettled
	case <-t.C:
	case <-ctx.Done():
	}
	return notFinishing
}
