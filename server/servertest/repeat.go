// This file holds the subtests of the rule that every Store call may have happened even
// when its reply was lost: repeated with the same token, a Claim, Complete, Release or
// TakeOver recognises its own earlier success, and a Renew of 0 hands the record to
// recovery at once.

package servertest

import (
	"testing"

	"github.com/idem-go/idem/server"
)

var repeatTests = []subtest{
	{"ClaimRepeated", testClaimRepeated},
	{"CompleteRepeated", testCompleteRepeated},
	{"ReleaseRepeated", testReleaseRepeated},
	{"TakeOverRepeated", testTakeOverRepeated},
	{"RenewZeroEndsLease", testRenewZeroEndsLease},
	{"ReleasedTokenRefused", testReleasedTokenRefused},
}

// A token released (found or not) is refused by a later Claim, as a claim delayed in the
// network past its clean-up is: it must not make a record no handler runs. Other tokens
// claim as usual.
func testReleasedTokenRefused(t *testing.T, e *env) {
	never := scope(t, "never-claimed")
	late := server.NewToken()
	if err := e.s.Release(ctx, never, late); err != nil {
		t.Fatalf("Release of a record not there yet: %v", err)
	}
	_, err := e.s.Claim(ctx, never, late, "fp", e.lease, e.ttl)
	wantLost(t, "a Claim arriving after its Release", err)
	e.claim(t, never, "fp", e.lease)

	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	if err := e.s.Release(ctx, sc, token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	_, err = e.s.Claim(ctx, sc, token, "fp", e.lease, e.ttl)
	wantLost(t, "a repeated Claim arriving after the Release", err)
	e.claim(t, sc, "fp", e.lease)
}

// A Claim repeated with its token finds its own record and counts as claimed; another
// token finds the record held.
func testClaimRepeated(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	cl, err := e.s.Claim(ctx, sc, token, "fp", e.lease, e.ttl)
	if err != nil || !cl.Claimed || cl.Token != token {
		t.Fatalf("the repeated Claim = %+v, %v; want Claimed under %q", cl, err, token)
	}
	if rec := e.existing(t, sc, "fp"); rec.State != server.StateInProgress || rec.Token != token {
		t.Errorf("record = %+v, want in progress under %q", rec, token)
	}
	if err := e.s.Complete(ctx, sc, token, &server.Response{Status: 201}, e.ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	cl, err = e.s.Claim(ctx, sc, token, "fp", e.lease, e.ttl)
	if err != nil || cl.Claimed || cl.Record.State != server.StateDone {
		t.Errorf("a Claim with the completer's token = %+v, %v; want the done record", cl, err)
	}
}

// A Complete repeated with its token succeeds again and changes nothing.
func testCompleteRepeated(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	for i := range 3 {
		if err := e.s.Complete(ctx, sc, token, &server.Response{Status: 201 + i, Body: []byte{byte('a' + i)}}, e.ttl); err != nil {
			t.Fatalf("Complete #%d: %v", i+1, err)
		}
	}
	if rec := e.existing(t, sc, "fp"); rec.State != server.StateDone || rec.Response.Status != 201 || string(rec.Response.Body) != "a" {
		t.Errorf("record = %+v, want done with the first completion's response", rec)
	}
}

// A Release repeated with its token succeeds again; the Scope is free, and a Claim by
// another token makes a new record that the old token cannot release.
func testReleaseRepeated(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	for i := range 2 {
		if err := e.s.Release(ctx, sc, token); err != nil {
			t.Fatalf("Release #%d: %v", i+1, err)
		}
	}
	fresh := e.claim(t, sc, "fp", e.lease)
	wantLost(t, "Release by the released token", e.s.Release(ctx, sc, token))
	if rec := e.existing(t, sc, "fp"); rec.Token != fresh {
		t.Errorf("record = %+v, want held by the new claim %q", rec, fresh)
	}
}

// A TakeOver repeated with its new token succeeds again; the record stays held by it.
func testTakeOverRepeated(t *testing.T, e *env) {
	sc := scope(t, "a")
	old := e.claim(t, sc, "fp", e.short)
	e.pass(e.short + e.margin())
	token := server.NewToken()
	for i := range 2 {
		if err := e.s.TakeOver(ctx, sc, old, token, e.lease); err != nil {
			t.Fatalf("TakeOver #%d: %v", i+1, err)
		}
	}
	wantLost(t, "TakeOver by a third token", e.s.TakeOver(ctx, sc, old, server.NewToken(), e.lease))
	if rec := e.existing(t, sc, "fp"); rec.Token != token || rec.LeaseLeft <= 0 {
		t.Errorf("record = %+v, want a live lease held by %q", rec, token)
	}
}

// A Renew of 0 ends the lease at once, so that another holder may take the record over
// without waiting for it to lapse.
func testRenewZeroEndsLease(t *testing.T, e *env) {
	sc := scope(t, "a")
	old := e.claim(t, sc, "fp", e.lease)
	if err := e.s.Renew(ctx, sc, old, 0); err != nil {
		t.Fatalf("Renew(0): %v", err)
	}
	e.pass(e.margin()) // a Store of whole milliseconds may round the end up
	if rec := e.existing(t, sc, "fp"); rec.LeaseLeft > 0 {
		t.Fatalf("record = %+v after Renew(0), want a lapsed lease", rec)
	}
	if err := e.s.TakeOver(ctx, sc, old, server.NewToken(), e.lease); err != nil {
		t.Errorf("TakeOver after Renew(0): %v", err)
	}
}
