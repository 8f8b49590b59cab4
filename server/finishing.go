// finishing.go lets a copy that arrives while its key's handler has just returned on this
// instance wait for the record to be settled (completed or released, bounded by
// StoreTimeout) instead of getting 409: the window between the end of an answer and its
// completion.

package server

import (
	"context"
	"sync"
	"time"
)

// finishing holds the records, by Scope, whose handler returned here and whose settling
// has not been resolved, and those settled within settledFor. It costs one allocation per
// record and no timer: settled records are dropped, oldest first, as new ones come. It is
// safe for concurrent use.
type finishing struct {
	mu      sync.Mutex
	recs    map[Scope]*settling
	settled []*settling // settled records, oldest first from head, to drop after settledFor
	head    int
}

// settling is one record being settled, or settled lately.
type settling struct {
	f    *finishing
	sc   Scope
	at   time.Time     // when it was settled; zero until then
	done chan struct{} // closed when settled; made by the first copy that waits
}

// settledFor is how long a settled record stays noted: a copy whose claim saw the record
// in progress just before it was settled then still finds it, and claims again.
const settledFor = time.Second

// add notes that the record sc is being settled and returns the note, whose settle is to
// be called once, when it is.
func (f *finishing) add(sc Scope) *settling {
	s := &settling{f: f, sc: sc}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recs == nil {
		f.recs = map[Scope]*settling{}
	}
	f.drop(time.Now())
	f.recs[sc] = s
	return s
}

// settle notes that s's record is settled and wakes the copies waiting for it. A nil s is
// no note.
func (s *settling) settle() {
	if s == nil {
		return
	}
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	s.at = time.Now()
	if s.done != nil {
		close(s.done)
	}
	f.settled = append(f.settled, s)
}

// drop forgets the records settled settledFor before now. Called with mu held.
func (f *finishing) drop(now time.Time) {
	for f.head < len(f.settled) && now.Sub(f.settled[f.head].at) >= settledFor {
		s := f.settled[f.head]
		if f.recs[s.sc] == s {
			delete(f.recs, s.sc)
		}
		f.settled[f.head] = nil
		f.head++
	}
	if f.head > 0 && f.head >= len(f.settled)/2 {
		// Move the live tail to the front, so that the slice does not grow without end.
		n := copy(f.settled, f.settled[f.head:])
		clear(f.settled[n:])
		f.settled, f.head = f.settled[:n], 0
	}
}

// wait waits, up to limit or until ctx ends, for the record sc to be settled if its
// handler returned here (or was settled here within settledFor), and reports whether it
// was.
func (f *finishing) wait(ctx context.Context, sc Scope, limit time.Duration) bool {
	f.mu.Lock()
	s := f.recs[sc]
	if s == nil || (!s.at.IsZero() && time.Since(s.at) >= settledFor) {
		f.mu.Unlock()
		return false
	}
	if !s.at.IsZero() {
		f.mu.Unlock()
		return true
	}
	if s.done == nil {
		s.done = make(chan struct{})
	}
	done := s.done
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
