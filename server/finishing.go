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

// finishing holds the records, by Scope.ID, whose handler returned here and whose
// settling has not been resolved. It is safe for concurrent use.
type finishing struct {
	mu   sync.Mutex
	recs map[string]chan struct{}
}

// settledFor is how long a settled record stays noted, closed: a copy whose claim saw the
// record in progress just before it was settled then still finds it, and claims again.
const settledFor = time.Second

// add notes that the record id is being settled and returns the function to call, once,
// when it is.
func (f *finishing) add(id string) (settled func()) {
	done := make(chan struct{})
	f.mu.Lock()
	if f.recs == nil {
		f.recs = map[string]chan struct{}{}
	}
	f.recs[id] = done
	f.mu.Unlock()
	return func() {
		close(done)
		time.AfterFunc(settledFor, func() {
			f.mu.Lock()
			if f.recs[id] == done {
				delete(f.recs, id)
			}
			f.mu.Unlock()
		})
	}
}

// wait waits, up to limit or until ctx ends, for the record id to be settled if its
// handler returned here (or was settled here within settledFor), and reports whether it
// was.
func (f *finishing) wait(ctx context.Context, id string, limit time.Duration) bool {
	f.mu.Lock()
	done := f.recs[id]
	f.mu.Unlock()
	if done == nil {
		return false
	}
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
