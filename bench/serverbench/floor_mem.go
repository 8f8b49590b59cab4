// This file holds the in-memory floor's keeper: a map under one mutex,
// claimed by inserting the key, completed by storing the answer in it.

package serverbench

import (
	"context"
	"net/http"
	"sync"
)

// memKeeper is safe for concurrent use. It keeps every key for the life of
// the process (no expiry).
type memKeeper struct {
	mu   sync.Mutex
	done map[string][]byte // key -> stored answer; nil while its handler runs
}

func newMemFloor(next http.Handler) *floor {
	return &floor{next: next, k: &memKeeper{done: make(map[string][]byte)}}
}

func (m *memKeeper) claim(_ context.Context, key string) (bool, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if stored, found := m.done[key]; found {
		return false, stored, nil
	}
	m.done[key] = nil
	return true, nil, nil
}

func (m *memKeeper) complete(_ context.Context, key string, stored []byte) {
	m.mu.Lock()
	m.done[key] = stored
	m.mu.Unlock()
}
