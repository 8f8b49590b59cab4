// Package servertest is the conformance suite every server.Store runs, in the manner of
// testing/fstest: a Store's own tests call Run with a way to open empty Stores, and the
// suite checks each rule of the server.Store contract in a parallel subtest.
//
// This file holds Run, its Config, Clock and the helpers the subtests share; the subtests
// are grouped by what they exercise: claim.go (claims, atomicity, fingerprints, scopes),
// lease.go (renew, release, take-over, fencing), record.go (stored responses, expiry),
// repeat.go (every call repeated with its token, as after a lost reply).
package servertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
)

// Config tells Run how to get the Stores it tests. Only Open is required. Run's parallel
// subtests share it: it must not be changed while they run, and its functions must be
// safe for concurrent use.
type Config struct {
	// Open returns a new, empty Store for the calling subtest alone (or a shared one in
	// which no other subtest's Scopes occur: each subtest uses Scopes of its own). Subtests
	// run in parallel, so Open is called concurrently. Register any cleanup on t.
	Open func(t testing.TB) server.Store

	// Advance moves the clock of s, a Store Open returned, forward by d. nil means the
	// Store keeps real time (Redis's, the database's): the subtests that need a lease or
	// a record to run out then use leases of RealLease and wait for them for real.
	Advance func(s server.Store, d time.Duration)

	// RealLease is the lease (and the short TTL) used when Advance is nil; 0 means 300 ms.
	// It must be long enough for a few round trips to the Store.
	RealLease time.Duration
}

// Run runs the conformance suite against the Stores c opens.
func Run(t *testing.T, c Config) {
	t.Helper()
	if c.Open == nil {
		t.Fatal("servertest: Config.Open is nil")
	}
	if c.RealLease <= 0 {
		c.RealLease = 300 * time.Millisecond
	}
	for _, group := range [][]subtest{claimTests, leaseTests, recordTests, repeatTests} {
		for _, st := range group {
			t.Run(st.name, func(t *testing.T) {
				t.Parallel()
				st.fn(t, newEnv(t, &c))
			})
		}
	}
}

// subtest is one rule of the contract, checked on a Store of its own.
type subtest struct {
	name string
	fn   func(t *testing.T, e *env)
}

// env is what a subtest works with: its Store and the durations that suit its clock.
type env struct {
	s     server.Store
	c     *Config
	lease time.Duration // a lease that runs out only when the subtest lets it
	ttl   time.Duration // a TTL longer than lease
	short time.Duration // a lease or TTL the subtest lets run out, with pass
}

func newEnv(t *testing.T, c *Config) *env {
	s := c.Open(t)
	if s == nil {
		t.Fatal("Config.Open returned a nil Store")
	}
	e := &env{s: s, c: c, lease: time.Minute, ttl: time.Hour, short: c.RealLease}
	if c.Advance != nil {
		e.short = 10 * time.Second
	}
	return e
}

// pass lets d go by on the Store's clock.
func (e *env) pass(d time.Duration) {
	if e.c.Advance != nil {
		e.c.Advance(e.s, d)
		return
	}
	time.Sleep(d)
}

// margin is how far past a deadline the subtests look: on a real clock, a generous
// allowance for the Store's round trips and clock granularity.
func (e *env) margin() time.Duration {
	if e.c.Advance != nil {
		return time.Millisecond
	}
	return e.short / 2
}

var ctx = context.Background()

// scope returns a Scope unique to t, named by name.
func scope(t *testing.T, name string) server.Scope {
	return server.Scope{Identity: "identity-" + t.Name(), Method: "POST", Path: "/payments", Key: "key-" + name}
}

// claim claims sc with fingerprint fp under a new token and fails t unless that made a new
// record held under it. It returns the token.
func (e *env) claim(t *testing.T, sc server.Scope, fp string, lease time.Duration) string {
	t.Helper()
	token := server.NewToken()
	cl, err := e.s.Claim(ctx, sc, token, fp, lease, e.ttl)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if !cl.Claimed || cl.Token != token {
		t.Fatalf("Claim of a new scope = %+v, want Claimed under the caller's token %q", cl, token)
	}
	return token
}

// existing claims sc and fails t unless it found a live record, which it returns.
func (e *env) existing(t *testing.T, sc server.Scope, fp string) server.Record {
	t.Helper()
	cl, err := e.s.Claim(ctx, sc, server.NewToken(), fp, e.lease, e.ttl)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if cl.Claimed {
		t.Fatalf("Claim of a live scope made a new record (token %q)", cl.Token)
	}
	return cl.Record
}

// wantLost fails t unless err is server.ErrLeaseLost.
func wantLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, server.ErrLeaseLost) {
		t.Errorf("%s = %v, want ErrLeaseLost", what, err)
	}
}

// Clock is a settable clock for a Store under test (memstore.Options.Now) and the
// Config.Advance that moves it. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the Clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the Clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func isLost(err error) bool { return errors.Is(err, server.ErrLeaseLost) }
