// This file holds the in-memory contract floor's keeper: a map under one
// mutex, as the in-memory floor's, whose records carry the fingerprint, the
// claim's token, a lease and an expiry. It does not sweep expired records:
// a claim finds them expired and replaces them.

package serverbench

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// memContractKeeper is safe for concurrent use.
type memContractKeeper struct {
	lease, ttl time.Duration

	mu      sync.Mutex
	records map[string]*memContractRecord // by scope
}

// memContractRecord is one scope's record; its fields change under the
// keeper's mutex only, and an answer, once set, is never changed.
type memContractRecord struct {
	contractRecord
	token string
	// leasedUntil is zero once completed. The contract's record keeps its
	// lease; no Recover reads it here.
	leasedUntil time.Time
	expires     time.Time // the record is gone after it
}

func newMemContractFloor(next http.Handler, lease, ttl time.Duration) *contractFloor {
	return &contractFloor{next: next, lease: lease,
		k: &memContractKeeper{lease: lease, ttl: ttl, records: make(map[string]*memContractRecord)}}
}

func (m *memContractKeeper) claim(_ context.Context, scope, fp, token string) (contractRecord, bool, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec, ok := m.records[scope]; ok && now.Before(rec.expires) {
		return rec.contractRecord, false, nil
	}
	m.records[scope] = &memContractRecord{contractRecord: contractRecord{fingerprint: fp}, token: token,
		leasedUntil: now.Add(m.lease), expires: now.Add(m.ttl)}
	return contractRecord{}, true, nil
}

func (m *memContractKeeper) complete(_ context.Context, scope, _, token string, a *contractAnswer) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec, ok := m.records[scope]; ok && rec.token == token && rec.answer == nil {
		rec.answer, rec.leasedUntil, rec.expires = a, time.Time{}, now.Add(m.ttl)
	}
	return nil
}
