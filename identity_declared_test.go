// Tests for declared identities (Options.Identity, WithIdentity): a refreshed
// token stays one operation while another tenant is refused, in a call and
// after a restart; Resume hands PrepareResume the operation's identity and
// refuses to send what Options.Identity maps to another one; and a payment
// whose answer was lost is made once across a refresh, if the server scopes
// keys by the tenant too.

package idem

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// authLog is a base RoundTripper that records the Authorization and key of
// every attempt, then sends it on.
type authLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string // "key auth"
}

func (a *authLog) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Header.Get(DefaultKeyHeader)+" "+r.Header.Get("Authorization"))
	a.mu.Unlock()
	return a.next.RoundTrip(r)
}

func (a *authLog) sent() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// Under a declared identity a refreshed token continues the operation, with
// its key; another tenant is refused, whatever its token.
func TestIdentityDeclaredSurvivesTokenRefresh(t *testing.T) {
	for _, how := range []string{"Options.Identity", "WithIdentity"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			pay, base, rt := paymentsOver(t, how == "WithIdentity")
			wire := &authLog{next: rt}
			opts := Options{MaxAttempts: 1}
			ctxFor := func(tenant string) context.Context {
				return WithOperationID(context.Background(), "order-6/charge")
			}
			if how == "Options.Identity" {
				opts.Identity = tenantOf
			} else {
				ctxFor = func(tenant string) context.Context {
					return WithIdentity(WithOperationID(context.Background(), "order-6/charge"), tenant)
				}
			}
			j, _ := testJournal(t)
			tr, clk := transportOn(t, j, opts, wire, time.Time{})
			pay.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
			_, err := tr.RoundTrip(tenantPayment(t, ctxFor("acme"), base, "order-6", tokenAcme))
			pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
			rec, err := j.Lookup("order-6/charge")
			require.NoError(t, err)
			require.Equal(t, "acme", rec.Identity)
			require.Empty(t, rec.CredentialTag, "a declared identity is the binding")

			sent := pay.Ledger().Requests
			_, err = tr.RoundTrip(tenantPayment(t, ctxFor("globex"), base, "order-6", tokenGlobex))
			require.ErrorIs(t, err, ErrIdentityMismatch)
			requireNothingSent(t, pay, sent)

			j = reopen(t, j)
			tr, _ = transportOn(t, j, opts, wire, clk.Now())
			_, err = tr.RoundTrip(tenantPayment(t, ctxFor("globex"), base, "order-6", tokenGlobex))
			require.ErrorIs(t, err, ErrIdentityMismatch, "after a restart too")
			requireNothingSent(t, pay, sent)

			resp, err := tr.RoundTrip(tenantPayment(t, ctxFor("acme"), base, "order-6", tokenAcme2))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)
			got := wire.sent()
			require.Len(t, got, 2)
			require.Equal(t, rec.Key+" "+tokenAcme2, got[1], "the same key, with the fresh token")
			require.NoError(t, pay.Ledger().Check([]string{"order-6"}))
		})
	}
}

// With no identity declared, a fresh token (in a header or a sensitive
// query parameter) is other credentials: refused, as the safe default.
func TestIdentityUndeclaredRefusesFreshCredentials(t *testing.T) {
	pay, base, rt := paymentsOver(t, false)
	j := memStore(t)
	tr, clk := transportOver(t, j, Options{MaxAttempts: 1, SensitiveQueryParams: []string{"token"}}, rt, time.Time{})
	call := func(auth, query string) (*http.Response, error) {
		ctx := WithOperationID(context.Background(), "order-7/charge")
		req := tenantPayment(t, ctx, base, "order-7", auth)
		req.URL.RawQuery = query
		return tr.RoundTrip(req)
	}
	pay.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	_, err := call(tokenAcme, "token=q1")
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
	sent := pay.Ledger().Requests
	for _, c := range []struct{ auth, query string }{
		{tokenAcme2, "token=q1"}, {tokenAcme, "token=q2"}, {"", "token=q1"}, {tokenAcme, ""},
	} {
		_, err = call(c.auth, c.query)
		require.ErrorIs(t, err, ErrIdentityMismatch, "%+v", c)
		requireNothingSent(t, pay, sent)
	}
	resp, err := call(tokenAcme, "token=q1")
	require.NoError(t, err)
	drain(t, resp)
	require.NoError(t, pay.Ledger().Check([]string{"order-7"}))
}

// A declared identity is checked before anything is written or sent.
func TestIdentityDeclaredIsChecked(t *testing.T) {
	t.Parallel()
	pay, base, rt := paymentsOver(t, false)
	j, _ := testJournal(t)
	failing := errors.New("no tenant for this request")
	opts := Options{Identity: func(r *http.Request) (string, error) {
		if r.Header.Get("X-Fail") != "" {
			return "", failing
		}
		return tenantOf(r)
	}}
	tr, _ := transportOn(t, j, opts, rt, time.Time{})
	call := func(ctx context.Context, token string, header ...string) error {
		req := tenantPayment(t, ctx, base, "order-8", token)
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := tr.RoundTrip(req)
		if err == nil {
			drain(t, resp)
		}
		return err
	}
	bg := context.Background()
	require.ErrorIs(t, call(WithIdentity(bg, "globex"), tokenAcme), ErrInvalidRequest, "the two disagree")
	require.ErrorIs(t, call(bg, tokenAcme, "X-Fail", "1"), failing)
	require.ErrorIs(t, call(WithIdentity(bg, "bad\nname"), ""), ErrInvalidRequest)
	require.ErrorIs(t, call(WithIdentity(bg, string(make([]byte, 256))), ""), ErrInvalidRequest)
	require.ErrorIs(t, call(WithIdentity(bg, "acme_tok_3f9a1c"), tokenAcme), ErrInvalidRequest,
		"a credential as the identity would be journaled")
	require.ErrorIs(t, call(WithIdentity(bg, tokenGlobex), tokenGlobex), ErrInvalidRequest)
	requireNothingSent(t, pay, 0)
	records, err := j.Records()
	require.NoError(t, err)
	require.Empty(t, records, "nothing written")

	// Agreeing, or one of them silent, is fine.
	require.NoError(t, call(WithIdentity(WithOperationID(bg, "a"), "acme"), tokenAcme))
	require.NoError(t, call(WithIdentity(WithOperationID(bg, "b"), "initech"), ""))
	for id, want := range map[string]string{"a": "acme", "b": "initech"} {
		rec, err := j.Lookup(id)
		require.NoError(t, err)
		require.Equal(t, want, rec.Identity)
	}
}

// Two tenants racing with one operation ID: one runs it, the other is
// refused, and the server sees one payment.
func TestIdentityConcurrentTenants(t *testing.T) {
	t.Parallel()
	pay, base, rt := paymentsOver(t, true)
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, rt, time.Time{})
	ctx := WithOperationID(context.Background(), "order-9/charge")
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, token := range []string{tokenAcme, tokenGlobex} {
		wg.Go(func() {
			resp, err := tr.RoundTrip(tenantPayment(t, ctx, base, "order-9", token))
			if err == nil {
				resp.Body.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	require.True(t, (errs[0] == nil) != (errs[1] == nil), "one runs it: %v", errs)
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, ErrIdentityMismatch)
		}
	}
	require.Equal(t, 1, pay.Ledger().Requests)
	require.NoError(t, pay.Ledger().Check([]string{"order-9"}))
}

// After a restart, Resume gives PrepareResume each operation's identity, so
// it adds that tenant's (refreshed) credentials; an operation whose request
// Options.Identity then maps to another tenant is not sent.
func TestIdentityResume(t *testing.T) {
	t.Parallel()
	pay, base, rt := paymentsOver(t, false)
	wire := &authLog{next: rt}
	j, _ := testJournal(t)
	opts := Options{MaxAttempts: 1, Identity: tenantOf}
	tr, clk := transportOn(t, j, opts, wire, time.Time{})
	pay.Script(testserver.Fault{Kind: testserver.FaultStatus}, testserver.Fault{Kind: testserver.FaultStatus},
		testserver.Fault{Kind: testserver.FaultStatus})
	var next time.Time
	for _, c := range []struct{ op, token string }{
		{"acme-1", tokenAcme}, {"globex-1", tokenGlobex}, {"anon-1", "Bearer unknown_tok"},
	} {
		_, err := tr.RoundTrip(tenantPayment(t, WithOperationID(context.Background(), c.op), base, c.op, c.token))
		if at := pendingErr(t, err).NextAttempt; at.After(next) {
			next = at
		}
	}
	j = reopen(t, j)

	// A PrepareResume that gives every operation acme's token: globex's is
	// refused and stays pending; acme's is sent, and the one with no
	// declared identity is trusted to PrepareResume.
	current := map[string]string{"acme": tokenAcme2, "globex": tokenGlobex}
	var seen []string
	var mu sync.Mutex
	wrong := opts
	wrong.PrepareResume = func(r *http.Request) error {
		id, ok := IdentityFrom(r.Context())
		mu.Lock()
		seen = append(seen, r.Header.Get(DefaultKeyHeader)+"="+id+map[bool]string{true: "", false: "(none)"}[ok])
		mu.Unlock()
		r.Header.Set("Authorization", tokenAcme2)
		return nil
	}
	tr, clk2 := transportOn(t, j, wrong, wire, clk.Now())
	pastNextAttempt(clk2, next)
	outs := resumeAll(t, tr)
	require.Len(t, outs, 3)
	sort.Slice(outs, func(a, b int) bool { return outs[a].Record.OperationID < outs[b].Record.OperationID })
	require.NoError(t, outs[0].Err, "acme-1")
	require.NoError(t, outs[1].Err, "anon-1: no identity declared, PrepareResume is trusted")
	require.Equal(t, "globex-1", outs[2].Record.OperationID)
	require.ErrorIs(t, outs[2].Err, ErrIdentityMismatch)
	require.Len(t, wire.sent(), 3+2, "globex's was not sent")
	require.Len(t, seen, 3)
	require.Contains(t, seen, "="+"(none)", "no identity declared, none given")
	rec, err := j.Lookup("globex-1")
	require.NoError(t, err)
	require.Equal(t, StatePending, rec.State)

	// The right PrepareResume sends globex's with globex's token.
	right := opts
	right.PrepareResume = func(r *http.Request) error {
		id, ok := IdentityFrom(r.Context())
		require.True(t, ok)
		r.Header.Set("Authorization", current[id])
		return nil
	}
	tr, _ = transportOn(t, j, right, wire, clk2.Now())
	outs = resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, rec.Key+" "+tokenGlobex, wire.sent()[5])
	require.NoError(t, pay.Ledger().Check([]string{"acme-1", "globex-1", "anon-1"}))
}

// tenantHeader is an Options.Identity, for idem and for the testserver
// alike, that reads the tenant from a header the caller sets.
func tenantHeader(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }

// Exactly-once across a token refresh, end to end: the payment is made and
// its answer lost under token A; the retry under token B, the same tenant,
// carries the same key, and a server that scopes keys by the tenant replays
// the payment. A server that scopes keys by the token takes the same key
// from token B as a new client's and pays twice: the declared identity only
// helps when the server scopes by the account too.
func TestIdentityDeclaredTokenRefreshExactlyOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		scope    func(*http.Request) (string, error) // the server's Options.Identity
		replayed bool
	}{
		{"server scopes by tenant", tenantHeader, true},
		{"server scopes by token", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pay := startPayments(t, &testserver.Options{RequireKey: true, Identity: c.scope})
			wire := &authLog{next: pay.Client().Transport}
			j, _ := testJournal(t)
			opts := Options{Identity: tenantHeader}
			tr, clk := transportOn(t, j, opts, wire, time.Time{})
			call := func(token string) (*http.Response, error) {
				ctx := WithMaxAttempts(WithOperationID(context.Background(), "order-10/charge"), 1)
				req := tenantPayment(t, ctx, pay.URL, "order-10", token)
				req.Header.Set("X-Tenant", "acme")
				return tr.RoundTrip(req)
			}

			pay.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
			_, err := call(tokenAcme)
			pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
			rec, err := j.Lookup("order-10/charge")
			require.NoError(t, err)
			require.Equal(t, StatePending, rec.State)
			require.Equal(t, "acme", rec.Identity)
			require.Equal(t, map[string]int{"order-10": 1}, pay.Ledger().Effects, "paid, answer lost")

			resp, err := call(tokenAcme2)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)
			require.Equal(t, []string{rec.Key + " " + tokenAcme, rec.Key + " " + tokenAcme2}, wire.sent(),
				"the same key, with the refreshed token")
			if !c.replayed {
				require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
				require.ErrorIs(t, pay.Ledger().Check([]string{"order-10"}), testserver.ErrNotExactlyOnce,
					"a server that scopes keys by the token pays twice")
				return
			}
			require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
			require.NoError(t, pay.Ledger().Check([]string{"order-10"}))
			require.Equal(t, 1, pay.Ledger().Replays)
			rec, err = j.Lookup("order-10/charge")
			require.NoError(t, err)
			require.Equal(t, StateSettled, rec.State)
		})
	}
}
