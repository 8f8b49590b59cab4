// claim.go holds the subtests of Store.Claim: a new record, a live one found unchanged, one
// winner among concurrent claims, the first fingerprint kept, Scopes kept apart.

package servertest

import (
	"sync"
	"testing"

	"github.com/idem-go/idem/server"
)

var claimTests = []subtest{
	{"ClaimNew", testClaimNew},
	{"ClaimFindsLive", testClaimFindsLive},
	{"ClaimAtomic", testClaimAtomic},
	{"ClaimKeepsFingerprint", testClaimKeepsFingerprint},
	{"ScopesApart", testScopesApart},
}

// A claim of a new Scope makes an in-progress record and a token.
func testClaimNew(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp-a", e.lease)
	rec := e.existing(t, sc, "fp-a")
	if rec.State != server.StateInProgress || rec.Token != token || rec.Fingerprint != "fp-a" {
		t.Errorf("record = %+v, want in progress, token %q, fingerprint fp-a", rec, token)
	}
	if rec.Response != nil {
		t.Errorf("in-progress record has a response: %+v", rec.Response)
	}
}

// A claim of a live Scope reports the record, with its lease and expiry, and changes
// nothing: its token and lease stay the holder's.
func testClaimFindsLive(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	for range 2 {
		rec := e.existing(t, sc, "fp")
		if rec.Token != token {
			t.Fatalf("token = %q after a second claim, want the holder's %q", rec.Token, token)
		}
		if rec.LeaseLeft <= 0 || rec.LeaseLeft > e.lease {
			t.Errorf("LeaseLeft = %v, want in (0, %v]", rec.LeaseLeft, e.lease)
		}
		if rec.ExpiresIn <= 0 || rec.ExpiresIn > e.ttl {
			t.Errorf("ExpiresIn = %v, want in (0, %v]", rec.ExpiresIn, e.ttl)
		}
	}
	if err := e.s.Renew(ctx, sc, token, e.lease); err != nil {
		t.Errorf("Renew by the holder after other claims: %v", err)
	}
}

// Of many concurrent claims of one Scope, exactly one makes the record.
func testClaimAtomic(t *testing.T, e *env) {
	const n = 16
	sc := scope(t, "a")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var tokens []string
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			cl, err := e.s.Claim(ctx, sc, server.NewToken(), "fp", e.lease, e.ttl)
			if err != nil {
				errs <- err
				return
			}
			if cl.Claimed {
				mu.Lock()
				tokens = append(tokens, cl.Token)
				mu.Unlock()
			} else if cl.Record.State != server.StateInProgress {
				t.Errorf("a losing claim saw state %v, want in progress", cl.Record.State)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Claim: %v", err)
	}
	if len(tokens) != 1 {
		t.Fatalf("%d of %d concurrent claims made the record (tokens %q), want 1", len(tokens), n, tokens)
	}
}

// A claim with another fingerprint does not overwrite the record's, in progress or done.
func testClaimKeepsFingerprint(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp-first", e.lease)
	if rec := e.existing(t, sc, "fp-other"); rec.Fingerprint != "fp-first" || rec.Token != token {
		t.Errorf("record after a claim with another fingerprint = %+v, want fp-first held by %q", rec, token)
	}
	if err := e.s.Complete(ctx, sc, token, &server.Response{Status: 201}, e.ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rec := e.existing(t, sc, "fp-other")
	if rec.Fingerprint != "fp-first" || rec.State != server.StateDone {
		t.Errorf("done record after a claim with another fingerprint = %+v, want done with fp-first", rec)
	}
}

// Scopes that differ in any one field are separate records: claiming, completing or
// releasing one does not touch the others (server.Scope's doc).
func testScopesApart(t *testing.T, e *env) {
	base := scope(t, "a")
	variants := []server.Scope{base, base, base, base, base}
	variants[1].Identity += "-other"
	variants[2].Method = "PATCH"
	variants[3].Path = "/payments/2"
	variants[4].Key += "-other"
	ids := map[string]bool{}
	tokens := make([]string, len(variants))
	for i, sc := range variants {
		tokens[i] = e.claim(t, sc, "fp", e.lease)
		ids[sc.ID()] = true
	}
	if len(ids) != len(variants) {
		t.Errorf("Scope.ID gave %d names for %d scopes", len(ids), len(variants))
	}
	if err := e.s.Complete(ctx, variants[0], tokens[0], &server.Response{Status: 201, Body: []byte("A")}, e.ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := e.s.Release(ctx, variants[1], tokens[1]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for i, sc := range variants[2:] {
		rec := e.existing(t, sc, "fp")
		if rec.State != server.StateInProgress || rec.Token != tokens[i+2] {
			t.Errorf("scope %+v = %+v, want still in progress under %q", sc, rec, tokens[i+2])
		}
	}
	if rec := e.existing(t, variants[0], "fp"); rec.State != server.StateDone || string(rec.Response.Body) != "A" {
		t.Errorf("completed scope = %+v, want done with body A", rec)
	}
	e.claim(t, variants[1], "fp", e.lease) // released: free again
}
