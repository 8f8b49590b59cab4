// record.go holds the subtests of what a record keeps: a stored response round trip
// (binary body, repeated header fields, an unreplayable mark) and expiry by the Store's
// clock.

package servertest

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"

	"github.com/idem-go/idem/server"
)

var recordTests = []subtest{
	{"ResponseRoundTrip", testResponseRoundTrip},
	{"UnreplayableRoundTrip", testUnreplayableRoundTrip},
	{"DoneRecordExpires", testDoneRecordExpires},
	{"StuckRecordExpires", testStuckRecordExpires},
}

// A completed record gives back the response byte for byte: status, every header value
// in order, a binary body; changing the caller's copy afterwards changes nothing stored.
func testResponseRoundTrip(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	body := make([]byte, 0, 512)
	for i := range 512 {
		body = append(body, byte(i*7)) // every byte value, NUL and invalid UTF-8 included
	}
	want := &server.Response{
		Status: http.StatusCreated,
		Header: http.Header{
			"Content-Type": {"application/octet-stream"},
			"Location":     {"/payments/pay_1"},
			"X-Multi":      {"one", "two", "three"},
			"X-Empty":      {""},
		},
		Body: body,
	}
	sent := &server.Response{Status: want.Status, Header: want.Header.Clone(), Body: bytes.Clone(body)}
	if err := e.s.Complete(ctx, sc, token, sent, e.ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	sent.Body[0]++
	sent.Header.Set("Location", "changed")
	for range 2 { // and a replay's copy does not change the next one's
		rec := e.existing(t, sc, "fp")
		if rec.State != server.StateDone || rec.Response == nil {
			t.Fatalf("record = %+v, want done with a response", rec)
		}
		got := rec.Response
		if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) || got.Unreplayable != "" {
			t.Errorf("response = status %d, %d body bytes, unreplayable %q; want %d, the %d bytes sent",
				got.Status, len(got.Body), got.Unreplayable, want.Status, len(want.Body))
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Errorf("header = %v, want %v", got.Header, want.Header)
		}
		if rec.ExpiresIn <= 0 || rec.ExpiresIn > e.ttl {
			t.Errorf("ExpiresIn = %v, want in (0, %v]", rec.ExpiresIn, e.ttl)
		}
		if len(got.Body) > 0 {
			got.Body[0]++
		}
		got.Header.Set("Location", "changed by a replay")
	}
}

// A response marked unreplayable keeps its mark and status.
func testUnreplayableRoundTrip(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	sent := &server.Response{Status: 201, Unreplayable: server.UnreplayableStreamed}
	if err := e.s.Complete(ctx, sc, token, sent, e.ttl); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	rec := e.existing(t, sc, "fp")
	if rec.Response == nil || rec.Response.Status != 201 || rec.Response.Unreplayable != server.UnreplayableStreamed {
		t.Errorf("response = %+v, want status 201, unreplayable %q", rec.Response, server.UnreplayableStreamed)
	}
}

// A done record is forgotten TTL after its completion, by the Store's clock: the Scope is
// new again, and the old token holds nothing.
func testDoneRecordExpires(t *testing.T, e *env) {
	sc := scope(t, "a")
	token := e.claim(t, sc, "fp", e.lease)
	if err := e.s.Complete(ctx, sc, token, &server.Response{Status: 201}, 2*e.short); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	e.pass(e.short / 3)
	if rec := e.existing(t, sc, "fp"); rec.State != server.StateDone {
		t.Fatalf("record = %+v before its TTL, want done", rec)
	}
	e.pass(2*e.short + e.margin())
	e.claim(t, sc, "fp-new", e.lease)
	wantLost(t, "Complete by the expired record's token", e.s.Complete(ctx, sc, token, &server.Response{Status: 201}, e.ttl))
	if rec := e.existing(t, sc, "fp-new"); rec.State != server.StateInProgress || rec.Fingerprint != "fp-new" {
		t.Errorf("record = %+v, want the new claim's", rec)
	}
}

// A record stuck in progress (its holder gone, no take-over) is forgotten TTL after its
// claim; a holder's renewals keep it at least as long as the lease.
func testStuckRecordExpires(t *testing.T, e *env) {
	sc := scope(t, "a")
	token, err := e.s.Claim(ctx, sc, server.NewToken(), "fp", e.short/3, 2*e.short)
	if err != nil || !token.Claimed {
		t.Fatalf("Claim = %+v, %v", token, err)
	}
	e.pass(e.short/3 + e.margin()) // the lease lapsed, the TTL runs
	if rec := e.existing(t, sc, "fp"); rec.State != server.StateInProgress || rec.LeaseLeft > 0 {
		t.Fatalf("record = %+v, want stuck in progress", rec)
	}
	e.pass(2 * e.short)
	e.claim(t, sc, "fp", e.lease) // expired: new again
	wantLost(t, "Renew of the expired holder", e.s.Renew(ctx, sc, token.Token, e.lease))
}
