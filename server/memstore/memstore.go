// Package memstore is the in-memory server.Store: for tests, and for a service that runs
// as a single process and accepts that a restart forgets every key. Several middleware
// instances in one process may share one Store.
package memstore

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/idem-go/idem/server"
)

// Store is a server.Store in memory. Its clock is the now function given to New, so tests
// move leases and expiry without sleeping. It is safe for concurrent use.
//
// Its records hold few pointers (record.go), so that a Store of a day of keys costs the
// garbage collector little: a record is a pointer-free slot and one or two byte slices.
type Store struct {
	now  func() time.Time
	base time.Time // the origin of the Store's times (nanoseconds since base)
	seed maphash.Seed

	mu    sync.Mutex
	index map[uint64]int32 // a Scope's hash -> the first slot in use with that hash
	slots chunked[slot]    // the records; free ones are listed in free
	vars  chunked[recVars] // slot i's variable part
	free  []int32
	inUse int

	deadlines  []deadline       // a min-heap of when to delete records (expiry.go)
	released   map[string]int64 // tokens Release found nothing for (key: recordData's first tokenEnd bytes), until when
	tokenQueue []tokenDeadline  // when to forget them, oldest first from tokenHead
	tokenHead  int
}

// Options configures a Store. The zero value, like a nil *Options, uses the real clock.
type Options struct {
	// Now is the Store's clock, for leases and expiry. Nil means time.Now.
	Now func() time.Time
}

// New returns an empty Store. opts may be nil.
func New(opts *Options) *Store {
	now := time.Now
	if opts != nil && opts.Now != nil {
		now = opts.Now
	}
	return &Store{now: now, base: now(), seed: maphash.MakeSeed(), index: map[uint64]int32{}, released: map[string]int64{}}
}

// clock returns the Store's now, in nanoseconds since its base.
func (s *Store) clock() int64 { return int64(s.now().Sub(s.base)) }

// after returns t + d, saturated at the largest time.
func after(t int64, d time.Duration) int64 {
	if d > 0 && t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}

// Len returns how many live records the Store holds, for tests.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := s.clock(), 0
	for i := range s.slots.len() {
		if sl := s.slots.at(i); sl.used && now < sl.expires {
			n++
		}
	}
	return n
}

// Claim implements server.Store.
func (s *Store) Claim(ctx context.Context, sc server.Scope, token, fingerprint string, lease, ttl time.Duration) (server.Claim, error) {
	if err := ctx.Err(); err != nil {
		return server.Claim{}, err
	}
	if token == "" {
		return server.Claim{}, errNoToken
	}
	h := s.hash(sc)
	data, scopeEnd, tokenEnd := recordData(sc, token, fingerprint)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	i := s.find(sc, h)
	if i >= 0 && now < s.slots.at(i).expires {
		if !s.slots.at(i).done && string(s.token(i)) == token {
			return server.Claim{Claimed: true, Token: token}, nil // a repeat
		}
		rec, err := s.view(i, now)
		if err != nil {
			return server.Claim{}, err
		}
		return server.Claim{Record: rec}, nil
	}
	if until, ok := s.released[string(data[:tokenEnd])]; ok && now < until {
		return server.Claim{}, server.ErrLeaseLost // a late claim, released already
	}
	var gen uint32
	if i >= 0 {
		gen = s.slots.at(i).gen
	}
	s.expire(now)
	if i >= 0 && s.slots.at(i).used && s.slots.at(i).gen == gen {
		s.remove(i) // expired, and expire did not delete it
	}
	i = s.insert(h, data, scopeEnd, tokenEnd, after(now, lease), after(now, max(ttl, lease)))
	s.queue(i)
	return server.Claim{Claimed: true, Token: token}, nil
}

// Renew implements server.Store.
func (s *Store) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	err := s.held(ctx, sc, token, func(i int32, now int64) error {
		sl := s.slots.at(i)
		if sl.done || string(s.token(i)) != token {
			return server.ErrLeaseLost
		}
		sl.leaseUntil = after(now, lease)
		sl.expires = max(sl.expires, sl.leaseUntil)
		return nil
	})
	return lostIfAbsent(err)
}

// Complete implements server.Store.
func (s *Store) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	if resp == nil {
		return errNoResponse
	}
	st := store(resp)
	return lostIfAbsent(s.held(ctx, sc, token, func(i int32, now int64) error {
		sl := s.slots.at(i)
		own := string(s.token(i)) == token
		if sl.done {
			return repeated(own) // done: by this token (a repeat) or another
		}
		if !own {
			return server.ErrLeaseLost
		}
		s.keep(i, st)
		sl.expires = after(now, ttl)
		return nil
	}))
}

// Release implements server.Store.
func (s *Store) Release(ctx context.Context, sc server.Scope, token string) error {
	err := s.held(ctx, sc, token, func(i int32, _ int64) error {
		if s.slots.at(i).done || string(s.token(i)) != token {
			return server.ErrLeaseLost
		}
		s.remove(i)
		s.remember(sc, token)
		return nil
	})
	if errors.Is(err, errAbsent) {
		// Gone already, as Release wants.
		s.mu.Lock()
		defer s.mu.Unlock()
		s.remember(sc, token)
		return nil
	}
	return err
}

// remember keeps a released token, under the lock, so that a claim with it still on its
// way (a repeat delayed in the network) makes no record now.
func (s *Store) remember(sc server.Scope, token string) {
	key := string(append(appendScope(nil, sc), token...))
	until := after(s.clock(), server.ReleasedTokenTTL)
	s.released[key] = until
	s.tokenQueue = append(s.tokenQueue, tokenDeadline{at: until, key: key})
}

// TakeOver implements server.Store.
func (s *Store) TakeOver(ctx context.Context, sc server.Scope, stale, token string, lease time.Duration) error {
	if token == "" {
		return errNoToken
	}
	return lostIfAbsent(s.held(ctx, sc, stale, func(i int32, now int64) error {
		sl := s.slots.at(i)
		switch held := string(s.token(i)); {
		case !sl.done && held == token:
			return nil // a repeat
		case sl.done || held != stale || now < sl.leaseUntil:
			return server.ErrLeaseLost // done, held by another, or the holder is alive
		}
		data, scopeEnd, tokenEnd := recordData(sc, token, string(s.vars.at(i).data[sl.tokenEnd:]))
		s.vars.at(i).data, sl.scopeEnd, sl.tokenEnd = data, scopeEnd, tokenEnd
		sl.leaseUntil = after(now, lease)
		sl.expires = max(sl.expires, sl.leaseUntil)
		return nil
	}))
}

// held runs f, which checks token against the record itself, on the slot of the live
// record for sc under the lock. It returns errAbsent for no live record,
// server.ErrLeaseLost for an empty token, or what f returns.
func (s *Store) held(ctx context.Context, sc server.Scope, token string, f func(i int32, now int64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if token == "" {
		return server.ErrLeaseLost // no record is ever held under ""
	}
	h := s.hash(sc)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	i := s.live(sc, h, now)
	if i < 0 {
		return errAbsent
	}
	return f(i, now)
}

var (
	errAbsent     = errors.New("memstore: no live record")
	errNoToken    = errors.New("memstore: empty token")
	errNoResponse = errors.New("memstore: Complete with a nil response")
)

// lostIfAbsent maps errAbsent to server.ErrLeaseLost, for the transitions that need a record.
func lostIfAbsent(err error) error {
	if errors.Is(err, errAbsent) {
		return server.ErrLeaseLost
	}
	return err
}

// repeated is the answer to a transition that finds it has been made: nil if by the
// caller's own token (a repeat), else server.ErrLeaseLost.
func repeated(own bool) error {
	if own {
		return nil
	}
	return server.ErrLeaseLost
}

var _ server.Store = (*Store)(nil)
