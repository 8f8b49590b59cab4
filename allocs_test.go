// Allocation counts on the hot paths (identity.go's credential tag and
// binding, attempt.go's attempt and an unjournaled GET, request.go's stored
// header), without -race.

//go:build !race

// The race detector makes sync.Pool drop items at random, and adds
// allocations of its own: these counts hold only without it.

package idem

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

// A credential tag costs one allocation (its hex string) once the journal's
// keyed hash is pooled; hmac.New alone cost five.
func TestCredentialTagAllocs(t *testing.T) {
	j := memStore(t)
	creds := []byte("h\x0dAuthorization\x01\x0cBearer tok-1")
	g := newTagger(j.IdentityKey())
	g.tag(creds) // fills the pool
	if n := testing.AllocsPerRun(100, func() { g.tag(creds) }); n > 1 {
		t.Errorf("credentialTag: %v allocations, want at most 1", n)
	}
}

// Reading a call's binding allocates only its credential tag for a request
// with no declared identity and no representation headers: the binding
// stays on the call's stack.
func TestBindingAllocs(t *testing.T) {
	tr, _ := memTransport(t, nil)
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/payments", nil)
	require.NoError(t, err)
	rec := new(Record) // written before bindings: no tag to compute
	if n := testing.AllocsPerRun(100, func() {
		b, err := tr.bindingOf(req)
		if err != nil {
			t.Fatal(err)
		}
		tr.admit(rec, &b, journal.Name{OperationID: "op"})
	}); n > 1 {
		t.Errorf("bindingOf: %v allocations, want at most 1 (the credential tag)", n)
	}
}

// A keyed POST's attempt under the attempt timeout allocates its request
// (the copy and its header map: 3), its body's GetBody and io.NopCloser (2)
// and the trace's method value (1). The op (1 here) holds its first
// attempt's state: its context (which carries the trace and the Info, and
// which the Transport's watcher ends on timeout: no context, value context
// or timer of its own), the body that ends that context, the body reader
// and the headers' values.
func TestAttemptAllocs(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusCreated}
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		resp.Body = http.NoBody
		return resp, nil
	})
	tr, _ := memTransport(t, &Options{Base: base})
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/payments", nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	payload := []byte(`{"amount":100}`)
	n := testing.AllocsPerRun(100, func() {
		o := &op{req: req, key: "k-1", body: payload, limits: limits{maxAttempts: 1, attemptTimeout: time.Minute}}
		got, _, err := tr.attempt(req.Context(), o, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		got.Body.Close()
	})
	if n > 6 {
		t.Errorf("attempt: %v allocations, want at most 6", n)
	}
}

// A GET through the Transport allocates its op and its request (the copy
// and its header map: 3) beyond what its base does: 4. Over a base that
// makes a child of the request's context, as net/http does for every
// request, that child costs 4 more than over the caller's plain context:
// the context package's registration through the attempt context's
// AfterFunc (its function and the stop wrapper), the stop function and the
// Done channel. Over a caller's context that can end, the attempt's is a
// context.WithCancel of it: its context and cancel function, and the
// children map (2) and Done channel the base's child then needs, 5 in
// place of those 4. An Observer changes nothing. Without the attempt header
// (Options.DisableAttemptHeader), the copy shares the caller's header map
// instead of making one.
func TestUnjournaledGETAllocs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		child, cancel bool
		observer      Observer
		noAttempt     bool
		want          float64
	}{
		{name: "plain base", want: 4},
		{name: "without the attempt header", noAttempt: true, want: 2},
		{name: "base with a child context", child: true, want: 8},
		{name: "a caller's context that can end", child: true, cancel: true, want: 9},
		{name: "with an Observer", child: true, cancel: true, observer: NopObserver{}, want: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if tc.child {
					_, cancel := context.WithCancelCause(r.Context())
					defer cancel(nil)
				}
				resp.Request = r
				return resp, nil
			})
			tr, _ := memTransport(t, &Options{Base: base, Observer: tc.observer, DisableAttemptHeader: tc.noAttempt})
			ctx := context.Background()
			if tc.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:8080/payments", nil)
			require.NoError(t, err)
			send := func(rt http.RoundTripper) func() {
				return func() {
					got, err := rt.RoundTrip(req)
					if err != nil {
						t.Fatal(err)
					}
					got.Body.Close()
				}
			}
			n := testing.AllocsPerRun(100, send(tr)) - testing.AllocsPerRun(100, send(base))
			if n > tc.want {
				t.Errorf("GET: %v allocations more than its base, want at most %v", n, tc.want)
			}
		})
	}
}

// An already normalized Content-Type ("application/json") is taken as it
// is: mime's parse and format cost five allocations.
func TestMediaTypeAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { mediaType("application/json") }); n > 0 {
		t.Errorf("mediaType: %v allocations, want 0", n)
	}
}

// A header journaled whole (no sensitive or key header, every name
// canonical) is not copied: the record is the call's own, and a Store copies
// what it keeps. One that needs changing is copied, never changed in place.
func TestStoredHeaderAllocs(t *testing.T) {
	tr, _ := memTransport(t, nil)
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r-1"}}
	if n := testing.AllocsPerRun(100, func() { tr.storedHeader(h) }); n > 0 {
		t.Errorf("storedHeader: %v allocations, want 0", n)
	}
	for _, in := range []http.Header{
		{"Content-Type": {"application/json"}, "Authorization": {"Bearer s3cret"}},
		{"content-type": {"application/json"}},
		{"Content-Type": {"application/json"}, "idempotency-key": {"k-1"}},
	} {
		before := in.Clone()
		got := tr.storedHeader(in)
		require.Equal(t, before, in, "the caller's header is left as it was")
		require.Equal(t, http.Header{"Content-Type": {"application/json"}}, got)
	}
}

// A resumed operation's retry takes a token from a full bucket and its
// answer fills it again: the bucket comes and goes without an allocation.
func TestRetryBudgetResendAllocs(t *testing.T) {
	b := newBudget(RetryBudget{Ratio: DefaultRetryRatio, Burst: DefaultRetryBurst})
	now := time.Unix(1, 0)
	if n := testing.AllocsPerRun(100, func() {
		require.True(t, b.retry("a:80", now))
		b.answered("a:80", true)
	}); n != 0 {
		t.Fatalf("a retry and its answer: %v allocations, want 0", n)
	}
	require.Equal(t, float64(DefaultRetryBurst), b.available("a:80"))
}

// A scan parses each origin once: the host of a record whose origin it has
// met costs no allocation.
func TestOriginHostsRecordAllocs(t *testing.T) {
	hosts := originHosts{}
	rec := &Record{URL: "http://127.0.0.1:8080/orders/7"}
	hosts.record(rec)
	if n := testing.AllocsPerRun(100, func() { hosts.record(rec) }); n != 0 {
		t.Fatalf("originHosts.record: %v allocations, want 0", n)
	}
}
