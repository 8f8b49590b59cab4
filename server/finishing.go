// finishing.go lets a copy that arrives while its key's handler has just returned on this
// instance wait for the record to be settled (completed or released, bounded by
// StoreTimeout) instead of getting 409: the window between the end of an answer and its
// completion.

package server

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"
)

// finishing holds the records whose handler returned here and whose settling has not been
// resolved, and those settled within settledFor. Records are noted by a 64-bit hash of
// their Scope, in pointer-free entries: no allocation and little for the garbage collector
// per request. Two Scopes whose hashes collide (a chance of 2^-64) only cost a copy a wait
// it did not need, or a 409 instead of a wait: either way it claims again, and the Store
// decides. Settled notes are dropped, oldest first, as new ones come: no timer. It is safe
// for concurrent use.
type finishing struct {
	mu      sync.Mutex
	seed    maphash.Seed
	recs    map[uint64]note          // by the Scope's hash (finishing.hash)
	waiters map[uint64]chan struct{} // closed when the note of that hash is settled or replaced
	settled []settledNote            // settled notes, oldest first from head, to drop after settledFor
	head    int
	seq     uint64 // the last note's number
}

// note is one record being settled, or settled lately.
type note struct {
	seq     uint64
	at      int64 // when it was settled (sinceOrigin)
	settled bool
	waited  bool // a copy waits on waiters[hash]
}

// settledNote is a settled note as queued to be dropped.
type settledNote struct {
	hash, seq uint64
	at        int64
}

// settling is the handle of one note, to settle it once. The zero settling is no note.
type settling struct {
	f         *finishing
	hash, seq uint64
}

// settledFor is how long a settled record stays noted: a copy whose claim saw the record
// in progress just before it was settled then still finds it, and claims again.
const settledFor = time.Second

// origin is the start of sinceOrigin's monotonic clock.
var origin = time.Now()

// sinceOrigin is the monotonic clock, in nanoseconds.
func sinceOrigin() int64 { return int64(time.Since(origin)) }

// hash returns sc's hash. Called with mu held, after add has made the seed.
func (f *finishing) hash(sc Scope) uint64 {
	var h maphash.Hash
	h.SetSeed(f.seed)
	var n [8]byte
	for _, s := range [...]string{sc.Identity, sc.Method, sc.Path, sc.Key} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		_, _ = h.Write(n[:])
		_, _ = h.WriteString(s)
	}
	return h.Sum64()
}

// add notes that the record sc is being settled and returns the note's handle, whose
// settle is to be called once, when it is.
func (f *finishing) add(sc Scope) settling {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recs == nil {
		f.seed, f.recs, f.waiters = maphash.MakeSeed(), map[uint64]note{}, map[uint64]chan struct{}{}
	}
	f.drop(sinceOrigin())
	h := f.hash(sc)
	if old, ok := f.recs[h]; ok && old.waited && !old.settled {
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

// settle notes that s's record is settled and wakes the copies waiting for it.
func (s settling) settle() {
	f := s.f
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.recs[s.hash]
	if !ok || n.seq != s.seq {
		return // replaced by a newer note of its hash: that one's copies wait on it
	}
	if n.waited {
		f.wake(s.hash)
	}
	now := sinceOrigin()
	f.recs[s.hash] = note{seq: n.seq, at: now, settled: true}
	f.settled = append(f.settled, settledNote{hash: s.hash, seq: s.seq, at: now})
}

// drop forgets the records settled settledFor before now. Called with mu held.
func (f *finishing) drop(now int64) {
	for f.head < len(f.settled) && now-f.settled[f.head].at >= int64(settledFor) {
		s := f.settled[f.head]
		if f.recs[s.hash].seq == s.seq {
			delete(f.recs, s.hash)
		}
		f.head++
	}
	if f.head > 0 && f.head >= len(f.settled)/2 {
		// Move the live tail to the front, so that the slice does not grow without end.
		n := copy(f.settled, f.settled[f.head:])
		f.settled, f.head = f.settled[:n], 0
	}
}

// wait waits, up to limit or until ctx ends, for the record sc to be settled if its
// handler returned here (or was settled here within settledFor), and reports whether it
// was.
func (f *finishing) wait(ctx context.Context, sc Scope, limit time.Duration) bool {
	f.mu.Lock()
	if f.recs == nil {
		f.mu.Unlock()
		return false
	}
	h := f.hash(sc)
	n, ok := f.recs[h]
	if !ok || (n.settled && sinceOrigin()-n.at >= int64(settledFor)) {
		f.mu.Unlock()
		return false
	}
	if n.settled {
		f.mu.Unlock()
		return true
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
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
