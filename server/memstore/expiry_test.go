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

// Expired records go as claims come, a few per claim, so a busy Store stays the size of
// its live keys and no claim pays for all of them.
func TestExpiredRecordsDeleted(t *testing.T) {
	ctx, clock := context.Background(), servertest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := memstore.New(&memstore.Options{Now: clock.Now})
	for i := range 100 {
		if _, err := s.Claim(ctx, scope("old"+strconv.Itoa(i)), "t", "fp", time.Second, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Minute)
	for i := range 10 {
		if _, err := s.Claim(ctx, scope("new"+strconv.Itoa(i)), "t", "fp", time.Second, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.Kept(); n <= 10 || n >= 100 {
		t.Fatalf("after 10 claims: %d records kept, want some of the 100 expired ones deleted, not all at once", n)
	}
	for i := range 40 {
		if _, err := s.Claim(ctx, scope("more"+strconv.Itoa(i)), "t", "fp", time.Second, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.Kept(); n != 50 {
		t.Fatalf("after 50 claims: %d records kept, want the 50 live ones", n)
	}
}

// A record whose expiry moved later (its completion) outlives its first deadline, and is
// deleted at its new one.
func TestCompletedRecordOutlivesClaimDeadline(t *testing.T) {
	ctx, clock := context.Background(), servertest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := memstore.New(&memstore.Options{Now: clock.Now})
	if _, err := s.Claim(ctx, scope("a"), "t", "fp", time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(50 * time.Second)
	if err := s.Complete(ctx, scope("a"), "t", &server.Response{Status: 201}, time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(20 * time.Second) // past the claim's deadline, within the completion's
	for i := range 5 {
		if _, err := s.Claim(ctx, scope("b"+strconv.Itoa(i)), "t", "fp", time.Second, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Claim(ctx, scope("a"), "t2", "fp", time.Second, time.Minute)
	if err != nil || c.Claimed || c.Record.State != server.StateDone || c.Record.Response.Status != 201 {
		t.Fatalf("the completed record after its claim's deadline: %+v, %v; want it done, 201", c, err)
	}
	clock.Advance(time.Minute)
	for i := range 5 {
		if _, err := s.Claim(ctx, scope("c"+strconv.Itoa(i)), "t", "fp", time.Second, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.Kept(); n != 10 {
		t.Fatalf("%d records kept, want the 10 live ones: the completed one expired", n)
	}
}

// A released token is kept for server.ReleasedTokenTTL, then forgotten.
func TestReleasedTokensForgotten(t *testing.T) {
	ctx, clock := context.Background(), servertest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := memstore.New(&memstore.Options{Now: clock.Now})
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
