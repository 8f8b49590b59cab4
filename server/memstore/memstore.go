// Package memstore is the in-memory server.Store: for tests, and for a service that runs
// as a single process and accepts that a restart forgets every key. Several middleware
// instances in one process may share one Store.
package memstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idem-go/idem/server"
)

// Store is a server.Store in memory. Its clock is the now function given to New, so tests
// move leases and expiry without sleeping. It is safe for concurrent use.
type Store struct {
	now func() time.Time

	mu        sync.Mutex
	records   map[server.Scope]*record
	released  map[server.Scope]map[string]time.Time // tokens Release found nothing for, until when
	deadlines []deadline                            // a min-heap of when to delete them (expiry.go)
}

// record is one key's state. resp is immutable once set.
type record struct {
	fingerprint string
	token       string // the holder's while in progress; the completer's once done
	leaseUntil  time.Time
	expires     time.Time
	resp        *stored // set when done
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
	return &Store{now: now, records: make(map[server.Scope]*record), released: make(map[server.Scope]map[string]time.Time)}
}

// Len returns how many live records the Store holds, for tests.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := s.now(), 0
	for _, r := range s.records {
		if now.Before(r.expires) {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if r := s.live(sc, now); r != nil {
		if r.resp == nil && r.token == token {
			return server.Claim{Claimed: true, Token: token}, nil // a repeat
		}
		rec, err := r.view(now)
		if err != nil {
			return server.Claim{}, err
		}
		return server.Claim{Record: rec}, nil
	}
	if until, ok := s.released[sc][token]; ok && now.Before(until) {
		return server.Claim{}, server.ErrLeaseLost // a late claim, released already
	}
	s.expire(now)
	r := &record{
		fingerprint: fingerprint,
		token:       token,
		leaseUntil:  now.Add(lease),
		expires:     now.Add(max(ttl, lease)),
	}
	s.records[sc] = r
	s.queue(deadline{at: r.expires, scope: sc, rec: r})
	return server.Claim{Claimed: true, Token: r.token}, nil
}

// Renew implements server.Store.
func (s *Store) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	err := s.held(ctx, sc, token, func(r *record, now time.Time) error {
		if r.resp != nil || r.token != token {
			return server.ErrLeaseLost
		}
		r.leaseUntil = now.Add(lease)
		if r.expires.Before(r.leaseUntil) {
			r.expires = r.leaseUntil
		}
		return nil
	})
	return lostIfAbsent(err)
}

// Complete implements server.Store.
func (s *Store) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	if resp == nil {
		return errNoResponse
	}
	c := store(resp)
	return lostIfAbsent(s.held(ctx, sc, token, func(r *record, now time.Time) error {
		if r.resp != nil {
			return repeated(r.token == token) // done: by this token (a repeat) or another
		}
		if r.token != token {
			return server.ErrLeaseLost
		}
		r.resp, r.expires = c, now.Add(ttl)
		return nil
	}))
}

// Release implements server.Store.
func (s *Store) Release(ctx context.Context, sc server.Scope, token string) error {
	err := s.held(ctx, sc, token, func(r *record, _ time.Time) error {
		if r.resp != nil || r.token != token {
			return server.ErrLeaseLost
		}
		delete(s.records, sc)
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
	if s.released[sc] == nil {
		s.released[sc] = map[string]time.Time{}
	}
	until := s.now().Add(server.ReleasedTokenTTL)
	s.released[sc][token] = until
	s.queue(deadline{at: until, scope: sc, token: token})
}

// TakeOver implements server.Store.
func (s *Store) TakeOver(ctx context.Context, sc server.Scope, stale, token string, lease time.Duration) error {
	if token == "" {
		return errNoToken
	}
	return lostIfAbsent(s.held(ctx, sc, stale, func(r *record, now time.Time) error {
		switch {
		case r.resp == nil && r.token == token:
			return nil // a repeat
		case r.resp != nil || r.token != stale || now.Before(r.leaseUntil):
			return server.ErrLeaseLost // done, held by another, or the holder is alive
		}
		r.token, r.leaseUntil = token, now.Add(lease)
		if r.expires.Before(r.leaseUntil) {
			r.expires = r.leaseUntil
		}
		return nil
	}))
}

// held runs f, which checks token against the record itself, on the live record for sc
// under the lock. It returns errAbsent for no live record, server.ErrLeaseLost for an
// empty token, or what f returns.
func (s *Store) held(ctx context.Context, sc server.Scope, token string, f func(*record, time.Time) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if token == "" {
		return server.ErrLeaseLost // no record is ever held under ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r := s.live(sc, now)
	if r == nil {
		return errAbsent
	}
	return f(r, now)
}

// live returns the record for sc unless it is missing or expired at now.
func (s *Store) live(sc server.Scope, now time.Time) *record {
	r := s.records[sc]
	if r == nil || !now.Before(r.expires) {
		return nil
	}
	return r
}

// view is r as server.Store reports it at now.
func (r *record) view(now time.Time) (server.Record, error) {
	v := server.Record{Fingerprint: r.fingerprint, ExpiresIn: r.expires.Sub(now)}
	if r.resp != nil {
		resp, err := r.resp.response()
		v.State, v.Response = server.StateDone, resp
		return v, err
	}
	v.State, v.Token, v.LeaseLeft = server.StateInProgress, r.token, r.leaseUntil.Sub(now)
	return v, nil
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
