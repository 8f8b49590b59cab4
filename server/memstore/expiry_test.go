// expiry_test.go checks that the Store forgets what has expired, a few entries per claim,
// and nothing that still lives.

package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/servertest"
)

func scope(key string) server.Scope { return server.Scope{Method: "POST", Path: "/payments", Key: key} }

// newStore returns a Store on a fake clock, and the clock.
func newStore() (*memstore.Store, *servertest.Clock) {
	clock := servertest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return memstore.New(&memstore.Options{Now: clock.Now}), clock
}

// claimNew claims n new keys named prefix0, prefix1, ..., with a one-second lease and ttl.
func claimNew(t *testing.T, s *memstore.Store, prefix string, n int, ttl time.Duration) {
	t.Helper()
	for i := range n {
		if _, err := s.Claim(context.Background(), scope(prefix+strconv.Itoa(i)), "t", "fp", time.Second, ttl); err != nil {
			t.Fatal(err)
		}
	}
}

// Expired records go as claims come, a few per claim, so a busy Store stays the size of
// its live keys and no claim pays for all of them.
func TestExpiredRecordsDeleted(t *testing.T) {
	s, clock := newStore()
	claimNew(t, s, "old", 100, time.Minute)
	clock.Advance(2 * time.Minute)
	claimNew(t, s, "new", 10, time.Minute)
	if n, _ := s.Kept(); n <= 10 || n >= 100 {
		t.Fatalf("after 10 claims: %d records kept, want some of the 100 expired ones deleted, not all at once", n)
	}
	claimNew(t, s, "more", 40, time.Minute)
	if n, _ := s.Kept(); n != 50 {
		t.Fatalf("after 50 claims: %d records kept, want the 50 live ones", n)
	}
}

// A record whose expiry moved later (its completion) outlives its first deadline, and is
// deleted at its new one.
func TestCompletedRecordOutlivesClaimDeadline(t *testing.T) {
	ctx := context.Background()
	s, clock := newStore()
	if _, err := s.Claim(ctx, scope("a"), "t", "fp", time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(50 * time.Second)
	if err := s.Complete(ctx, scope("a"), "t", &server.Response{Status: 201}, time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(20 * time.Second) // past the claim's deadline, within the completion's
	claimNew(t, s, "b", 5, time.Hour)
	c, err := s.Claim(ctx, scope("a"), "t2", "fp", time.Second, time.Minute)
	if err != nil || c.Claimed || c.Record.State != server.StateDone || c.Record.Response.Status != 201 {
		t.Fatalf("the completed record after its claim's deadline: %+v, %v; want it done, 201", c, err)
	}
	clock.Advance(time.Minute)
	claimNew(t, s, "c", 5, time.Hour)
	if n, _ := s.Kept(); n != 10 {
		t.Fatalf("%d records kept, want the 10 live ones: the completed one expired", n)
	}
}

// A released token is kept for server.ReleasedTokenTTL, then forgotten.
func TestReleasedTokensForgotten(t *testing.T) {
	ctx := context.Background()
	s, clock := newStore()
	if err := s.Release(ctx, scope("a"), "late"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, scope("a"), "late", "fp", time.Second, time.Minute); err != server.ErrLeaseLost {
		t.Fatalf("a claim with a released token: %v, want server.ErrLeaseLost", err)
	}
	clock.Advance(server.ReleasedTokenTTL)
	if _, err := s.Claim(ctx, scope("b"), "t", "fp", time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, n := s.Kept(); n != 0 {
		t.Fatalf("%d released tokens kept after ReleasedTokenTTL, want 0", n)
	}
}

// Two simulated hours of keys, 100 every 20 seconds with a one-minute TTL, half completed
// and half released: the Store never holds more than a TTL's records and a
// ReleasedTokenTTL's tokens, and what the claims of one step have not deleted yet.
func TestExpiryKeepsStoreBounded(t *testing.T) {
	ctx := context.Background()
	s, clock := newStore()
	ttl, perStep := time.Minute, 100
	resp := &server.Response{Status: 201, Body: []byte(`{"id":"pay_1"}`)}
	maxRecords, maxTokens := 0, 0
	for i := range 2 * 60 * 60 / 20 * perStep {
		if i%perStep == 0 {
			clock.Advance(20 * time.Second)
		}
		sc := scope("k-" + strconv.Itoa(i))
		c, err := s.Claim(ctx, sc, server.NewToken(), "fp", 10*time.Second, ttl)
		if err != nil || !c.Claimed {
			t.Fatalf("claim %d: %+v, %v", i, c, err)
		}
		if i%2 == 0 {
			err = s.Complete(ctx, sc, c.Token, resp, ttl)
		} else {
			err = s.Release(ctx, sc, c.Token)
		}
		if err != nil {
			t.Fatal(err)
		}
		records, tokens := s.Kept()
		maxRecords, maxTokens = max(maxRecords, records), max(maxTokens, tokens)
	}
	keysIn := func(d time.Duration) int { return int(d/(20*time.Second)) * perStep }
	if limit := keysIn(ttl) + perStep; maxRecords > limit {
		t.Errorf("at most %d records kept, want at most %d", maxRecords, limit)
	}
	if limit := keysIn(server.ReleasedTokenTTL)/2 + perStep; maxTokens > limit {
		t.Errorf("at most %d released tokens kept, want at most %d", maxTokens, limit)
	}
	if least := keysIn(server.ReleasedTokenTTL)/2 - perStep; maxTokens < least {
		t.Errorf("at most %d released tokens kept, want at least %d: they are kept ReleasedTokenTTL", maxTokens, least)
	}
}
