// This file holds keyedLocks, which keeps two calls (or a call and Resume)
// from running one operation at the same time in this process.

package idem

import (
	"context"
	"sync"
)

// keyedLocks is a set of mutexes by name, created on demand.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// lock waits until name is free or ctx ends.
func (l *keyedLocks) lock(ctx context.Context, name string) error {
	for {
		l.mu.Lock()
		held, busy := l.m[name]
		if !busy {
			if l.m == nil {
				l.m = make(map[string]chan struct{})
			}
			l.m[name] = make(chan struct{})
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tryLock takes name if it is free.
func (l *keyedLocks) tryLock(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, busy := l.m[name]; busy {
		return false
	}
	if l.m == nil {
		l.m = make(map[string]chan struct{})
	}
	l.m[name] = make(chan struct{})
	return true
}

func (l *keyedLocks) unlock(name string) {
	l.mu.Lock()
	held := l.m[name]
	delete(l.m, name)
	l.mu.Unlock()
	close(held)
}
