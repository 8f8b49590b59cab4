// This file holds the in-memory floor middleware: a map under one mutex,
// claimed by inserting the key, completed by storing the answer in it.

package serverbench

import (
	"net/http"
	"sync"
)

// memFloor is safe for concurrent use. It keeps every key for the life of
// the process (no expiry).
type memFloor struct {
	next http.Handler
	mu   sync.Mutex
	done map[string][]byte // key -> stored answer; nil while its handler runs
}

func newMemFloor(next http.Handler) *memFloor {
	return &memFloor{next: next, done: make(map[string][]byte)}
}

func (f *memFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(keyHeader)
	if key == "" {
		f.next.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	stored, found := f.done[key]
	if !found {
		f.done[key] = nil
	}
	f.mu.Unlock()
	switch {
	case found && stored == nil:
		conflict(w)
		return
	case found:
		replay(w, stored)
		return
	}
	c := &capture{ResponseWriter: w}
	f.next.ServeHTTP(c, r)
	stored = c.stored()
	f.mu.Lock()
	f.done[key] = stored
	f.mu.Unlock()
}
