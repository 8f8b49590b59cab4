// lease.go holds the subtests of the fenced transitions: Renew, Release, TakeOver, and
// Complete refused to any token that no longer holds the record.

package servertest

import (
	"sync"
	"testing"

	"github.com/idem-go/idem/server"
)

var leaseTests = []subtest{
	{"RenewExtendsLease", testRenewExtendsLease},
	{"ReleaseFreesScope", testReleaseFreesScope},
	{"WrongTokenFenced", testWrongTokenFenced},
	{"DoneRecordFenced", testDoneRecordFenced},
	{"TakeOverLiveLeaseRefused", testTakeOverLiveLeaseRefused},
	{"TakeOverAfterLapse", testTakeOverAfterLapse},
	{"TakeOverAtomic", testTakeOverAtomic},
}

// A renewed lease outlives the original one; a lapsed lease nobody took over can still
// be renewed by its holder.
func testRenewExtendsLease(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.short)
	e.pass(e.short / 2)
	if err := e.s.Renew(ctx, sc, token, 2*e.short); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	e.pass(e.short*2/3 + e.margin()) // past the first lease, well within the renewed one
	if rec := e.existing(t, sc, "fp"); rec.LeaseLeft <= 0 {
		t.Errorf("LeaseLeft = %v after a renew, want > 0", rec.LeaseLeft)
	}
	e.pass(2*e.short + e.margin())
	if rec := e.existing(t, sc, "fp"); rec.LeaseLeft > 0 || rec.Token != token {
		t.Errorf("record = %+v after its lease ran out, want a lapsed lease held by %q", rec, token)
	}
	if err := e.s.Renew(ctx, sc, token, e.lease); err != nil {
		t.Errorf("Renew of a lapsed lease nobody took over: %v", err)
	}
	if rec := e.existing(t, sc, "fp"); rec.LeaseLeft <= 0 {
		t.Errorf("LeaseLeft = %v after renewing a lapsed lease, want > 0", rec.LeaseLeft)
	}
}

// Release deletes the record: the next claim makes a new one, with a new token, and the
// released token holds nothing.
func testReleaseFreesScope(t *testing.T, e *env) {
	sc := scope(t, "a")
	old := e.claim(t, sc, "fp", e.lease)
	if err := e.s.Release(ctx, sc, old); err != nil {
		t.Fatalf("Release: %v", err)
	}
	token := e.claim(t, sc, "fp-new", e.lease)
	if token == old {
		t.Errorf("the claim after a release reused the token %q", old)
	}
	wantLost(t, "Renew with the released token", e.s.Renew(ctx, sc, old, e.lease))
	wantLost(t, "Complete with the released token", e.s.Complete(ctx, sc, old, &server.Response{Status: 200}, e.ttl))
	wantLost(t, "Release with the released token", e.s.Release(ctx, sc, old))
	if rec := e.existing(t, sc, "fp-new"); rec.State != server.StateInProgress || rec.Token != token {
		t.Errorf("record = %+v, want in progress under %q", rec, token)
	}
}

// A token that never held the record changes nothing, and neither does any transition of
// a Scope without a record.
func testWrongTokenFenced(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	bad := token + "x"
	wantLost(t, "Renew", e.s.Renew(ctx, sc, bad, e.lease))
	wantLost(t, "Complete", e.s.Complete(ctx, sc, bad, &server.Response{Status: 200}, e.ttl))
	wantLost(t, "Release", e.s.Release(ctx, sc, bad))
	wantLost(t, "TakeOver", e.s.TakeOver(ctx, sc, bad, server.NewToken(), e.lease))
	if rec := e.existing(t, sc, "fp"); rec.State != server.StateInProgress || rec.Token != token {
		t.Errorf("record = %+v after fenced calls, want in progress under %q", rec, token)
	}
	none := scope(t, "never-claimed")
	wantLost(t, "Renew of a missing record", e.s.Renew(ctx, none, token, e.lease))
	wantLost(t, "Complete of a missing record", e.s.Complete(ctx, none, token, &server.Response{Status: 200}, e.ttl))
	if err := e.s.Release(ctx, none, token); err != nil {
		t.Errorf("Release of a missing record = %v, want nil: it is gone, as Release wants", err)
	}
	wantLost(t, "TakeOver of a missing record", e.s.TakeOver(ctx, none, token, server.NewToken(), e.lease))
	e.claim(t, none, "fp", e.lease) // and none of that made a record
}

// Once done, a record takes no further transition, not even from the token that completed
// it (whose repeated Complete is acknowledged but changes nothing), and keeps its response.
func testDoneRecordFenced(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	if err := e.s.Complete(ctx, sc, token, &server.Response{Status: 201, Body: []byte("first")}, e.ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := e.s.Complete(ctx, sc, token, &server.Response{Status: 500, Body: []byte("second")}, e.ttl); err != nil {
		t.Errorf("a second Complete by the completer = %v, want nil (a repeat)", err)
	}
	wantLost(t, "Complete by another token", e.s.Complete(ctx, sc, token+"x", &server.Response{Status: 500, Body: []byte("third")}, e.ttl))
	wantLost(t, "Renew of a done record", e.s.Renew(ctx, sc, token, e.lease))
	wantLost(t, "Release of a done record", e.s.Release(ctx, sc, token))
	wantLost(t, "TakeOver of a done record", e.s.TakeOver(ctx, sc, token, server.NewToken(), e.lease))
	rec := e.existing(t, sc, "fp")
	if rec.State != server.StateDone || rec.Response == nil || rec.Response.Status != 201 || string(rec.Response.Body) != "first" {
		t.Errorf("record = %+v, want done with the first response", rec)
	}
}

// TakeOver of a live lease is refused: the holder is alive.
func testTakeOverLiveLeaseRefused(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	wantLost(t, "TakeOver of a live lease", e.s.TakeOver(ctx, sc, token, server.NewToken(), e.lease))
	if err := e.s.Renew(ctx, sc, token, e.lease); err != nil {
		t.Errorf("the holder's Renew after a refused take-over: %v", err)
	}
}

// After the lease lapses, TakeOver hands the record to a new token and fences the old one
// out: the stalled holder's completion changes nothing, the new holder's stands (S25's
// rule, on the server side).
func testTakeOverAfterLapse(t *testing.T, e *env) {
	sc := scope(t, "a")
	old := e.claim(t, sc, "fp", e.short)
	e.pass(e.short + e.margin())
	rec := e.existing(t, sc, "fp")
	if rec.LeaseLeft > 0 || rec.Token != old {
		t.Fatalf("record = %+v after the lease, want a lapsed lease held by %q", rec, old)
	}
	token := server.NewToken()
	if err := e.s.TakeOver(ctx, sc, rec.Token, token, e.lease); err != nil {
		t.Fatalf("TakeOver: %v", err)
	}
	if rec := e.existing(t, sc, "fp"); rec.Token != token || rec.LeaseLeft <= 0 {
		t.Errorf("record = %+v after the take-over, want a live lease held by %q", rec, token)
	}
	wantLost(t, "the stalled holder's Renew", e.s.Renew(ctx, sc, old, e.lease))
	wantLost(t, "the stalled holder's Complete", e.s.Complete(ctx, sc, old, &server.Response{Status: 500, Body: []byte("stale")}, e.ttl))
	wantLost(t, "the stalled holder's Release", e.s.Release(ctx, sc, old))
	if err := e.s.Complete(ctx, sc, token, &server.Response{Status: 201, Body: []byte("new")}, e.ttl); err != nil {
		t.Fatalf("the new holder's Complete: %v", err)
	}
	if rec := e.existing(t, sc, "fp"); rec.State != server.StateDone || string(rec.Response.Body) != "new" {
		t.Errorf("record = %+v, want done with the new holder's response", rec)
	}
}

// Of concurrent take-overs of one lapsed token, exactly one succeeds.
func testTakeOverAtomic(t *testing.T, e *env) {
	const n = 8
	sc := scope(t, "a")
	old := e.claim(t, sc, "fp", e.short)
	e.pass(e.short + e.margin())
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for range n {
		wg.Go(func() {
			err := e.s.TakeOver(ctx, sc, old, server.NewToken(), e.lease)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case isLost(err):
				lost++
			default:
				t.Errorf("TakeOver: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != n-1 {
		t.Errorf("%d take-overs won and %d lost, want 1 and %d", won, lost, n-1)
	}
}
