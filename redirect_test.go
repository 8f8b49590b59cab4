// Tests of redirects after a journaled call (redirect.go): a payments API
// (testserver) behind a loopback front that redirects its endpoints, reached
// through an *http.Client whose Transport is idem's, over HTTP/1.1 and HTTP/2
// with TLS; and calling again, by operation ID, an operation a 307 or 308
// moved, through a primary that fails over to another region.

package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// protos are the two wires every redirect test runs over.
var protos = []struct {
	name string
	h2   bool
}{{"http1", false}, {"h2", true}}

// payment builds POST {url} for reference ref, its context carrying
// WithOperationID when keying is "op", its header a key when "header".
func payment(tb testing.TB, url, ref, keying string) *http.Request {
	tb.Helper()
	ctx := context.Background()
	if keying == "op" {
		ctx = WithOperationID(ctx, "charge/"+ref)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(paymentBody(ref, 100)))
	require.NoError(tb, err)
	req.Header.Set("Content-Type", "application/json")
	if keying == "header" {
		req.Header.Set(DefaultKeyHeader, "caller-key-"+ref)
	}
	return req
}

// TestRedirectChainIsOneOperation: a journaled POST answered 307, 308 or 303
// and followed by an http.Client is one operation: one record, one key on
// every POST, one effect, and the chain's final response. Before redirect.go,
// the hop collided with the operation's own record (ErrKeyReuse, after the
// 303's payment was made), or, with a minted key, became a second operation.
func TestRedirectChainIsOneOperation(t *testing.T) {
	t.Parallel()
	for _, p := range protos {
		for _, status := range []int{307, 308, 303} {
			for _, keying := range []string{"minted", "op", "header"} {
				t.Run(fmt.Sprintf("%s/%d/%s", p.name, status, keying), func(t *testing.T) {
					f := startFront(t, p.h2)
					j := memStore(t)
					tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
					c := &http.Client{Transport: tr}
					ref := fmt.Sprintf("r-%d-%s", status, keying)
					resp, err := c.Do(payment(t, fmt.Sprintf("%s/%d/payments", f.URL, status), ref, keying))
					require.NoError(t, err)
					got := drain(t, resp)
					want := map[int]int{307: 201, 308: 201, 303: 200}[status]
					require.Equal(t, want, resp.StatusCode, "%s", got)
					if p.h2 {
						require.Equal(t, 2, resp.ProtoMajor)
					}
					var pmt struct{ Reference string }
					require.NoError(t, json.Unmarshal(got, &pmt))
					require.Equal(t, ref, pmt.Reference)

					require.Equal(t, 1, f.pay.Ledger().Effects[ref])
					rec := onlyRecordIn(t, tr.journal)
					require.Equal(t, StateSettled, rec.State)
					require.Equal(t, map[int]int{307: 201, 308: 201, 303: 303}[status], rec.Status)
					for _, h := range f.seen() {
						if h.Method == http.MethodPost {
							require.Equal(t, []string{rec.Key}, h.Keys, "POST %s", h.Path)
						} else {
							require.Empty(t, h.Keys, "the GET after a 303 is a new request: %s %s", h.Method, h.Path)
						}
					}
				})
			}
		}
	}
}

// TestRedirectStatusTable: what each redirect status does to a journaled
// POST followed by an http.Client (the table in docs/real-world.md): never ErrKeyReuse,
// and the record keeps what the server said. A 301 or 302 to a POST is
// followed by net/http as a GET: the payment was not made, and the record
// says so with its status.
func TestRedirectStatusTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   int
		final    int    // the status the caller gets
		hop      string // the method of the hop
		settled  int    // the record's status
		location bool   // the record moved to the Location
		effects  int
	}{
		// The GET lands on the API's list, which wants a reference: 400.
		{301, 400, http.MethodGet, 301, false, 0},
		{302, 400, http.MethodGet, 302, false, 0},
		{303, 200, http.MethodGet, 303, false, 1},
		{307, 201, http.MethodPost, 201, true, 1},
		{308, 201, http.MethodPost, 201, true, 1},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			f := startFront(t, false)
			j := memStore(t)
			tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
			c := &http.Client{Transport: tr}
			resp, err := c.Do(payment(t, fmt.Sprintf("%s/%d/payments", f.URL, tc.status), "r", "op"))
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, tc.final, resp.StatusCode)
			hits := f.seen()
			require.Len(t, hits, 2)
			require.Equal(t, tc.hop, hits[1].Method)
			rec := onlyRecordIn(t, tr.journal)
			require.Equal(t, StateSettled, rec.State)
			require.Equal(t, tc.settled, rec.Status)
			require.Equal(t, f.URL+fmt.Sprintf("/%d/payments", tc.status), rec.URL, "URL stays the operation's identity")
			if tc.location {
				require.Equal(t, f.URL+"/payments", rec.Location)
			} else {
				require.Empty(t, rec.Location)
			}
			require.Equal(t, tc.effects, f.pay.Ledger().Effects["r"])
		})
	}
}

// TestErrKeyReuseMeansNothingSent: a call that returns ErrKeyReuse sent
// nothing. Before redirect.go a redirect chain broke that: the first POST
// reached the server (after a 303 the payment existed), then the hop
// returned ErrKeyReuse. Now a chain never returns it, and a reused operation
// ID with another body still does, with nothing sent.
func TestErrKeyReuseMeansNothingSent(t *testing.T) {
	t.Parallel()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			f := startFront(t, false)
			j := memStore(t)
			tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
			c := &http.Client{Transport: tr}
			resp, err := c.Do(payment(t, fmt.Sprintf("%s/%d/payments", f.URL, status), "r", "op"))
			if errors.Is(err, ErrKeyReuse) {
				require.Empty(t, f.seen(), "ErrKeyReuse, yet the server received %v", f.seen())
			}
			require.NoError(t, err)
			drain(t, resp)

			// The same operation ID for another payment: refused, unsent.
			before := len(f.seen())
			req := payment(t, fmt.Sprintf("%s/%d/payments", f.URL, status), "r", "op")
			req.Body = io.NopCloser(strings.NewReader(paymentBody("r", 999)))
			req.ContentLength, req.GetBody = -1, nil
			_, err = c.Do(req)
			require.ErrorIs(t, err, ErrKeyReuse)
			require.Len(t, f.seen(), before, "ErrKeyReuse, yet something was sent")
		})
	}
}

// TestRedirectNotFollowed: when the Client does not follow a 307 (its
// CheckRedirect says ErrUseLastResponse, or the body has no GetBody), the
// caller gets the 307 and the operation stays pending at the Location;
// Resume sends it there with the same key and bytes. Before redirect.go it
// settled with 307 and the payment was never made.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"check-redirect", "no-getbody"} {
		t.Run(how, func(t *testing.T) {
			f := startFront(t, false)
			j := memStore(t)
			tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
			c := &http.Client{Transport: tr}
			req := payment(t, f.URL+"/307/payments", "r", "op")
			if how == "check-redirect" {
				c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			} else {
				req.Body, req.GetBody = io.NopCloser(strings.NewReader(paymentBody("r", 100))), nil
			}
			resp, err := c.Do(req)
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
			rec := onlyRecordIn(t, tr.journal)
			require.Equal(t, StatePending, rec.State)
			require.Equal(t, f.URL+"/payments", rec.Location)
			require.Equal(t, 0, f.pay.Ledger().Effects["r"])

			outs := resumeAll(t, tr)
			require.Len(t, outs, 1)
			require.NoError(t, outs[0].Err)
			require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
			hits := f.seen()
			require.Len(t, hits, 2)
			require.Equal(t, "/payments", hits[1].Path)
			require.Equal(t, []string{rec.Key}, hits[1].Keys)
			require.Equal(t, hits[0].Body, hits[1].Body)
			require.Equal(t, 1, f.pay.Ledger().Effects["r"])
			require.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)
		})
	}
}

// offline is a base on which every dial fails: nothing reaches the server.
type offline struct{}

func (offline) RoundTrip(r *http.Request) (*http.Response, error) { return dialFailure{}.RoundTrip(r) }

// TestResumeFollowsRedirect: Resume follows a 307 or 308 itself, with the
// same key and bytes; before redirect.go it settled the operation with the
// redirect and the payment was never made.
func TestResumeFollowsRedirect(t *testing.T) {
	t.Parallel()
	for _, status := range []int{307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			f := startFront(t, true)
			j := memStore(t)
			down, _ := transportOver(t, j, Options{MaxAttempts: 1}, offline{}, time.Time{})
			_, err := down.RoundTrip(payment(t, fmt.Sprintf("%s/%d/payments", f.URL, status), "r", "op"))
			pendingErr(t, err)

			tr, clk := transportOver(t, j, Options{}, f.base(), time.Time{})
			clk.Advance(time.Minute)
			outs := resumeAll(t, tr)
			require.Len(t, outs, 1)
			require.NoError(t, outs[0].Err)
			require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
			rec := onlyRecordIn(t, tr.journal)
			require.Equal(t, StateSettled, rec.State)
			require.Equal(t, f.URL+"/payments", rec.Location)
			require.Equal(t, 1, f.pay.Ledger().Effects["r"])
			for _, h := range f.seen() {
				require.Equal(t, []string{rec.Key}, h.Keys)
			}
		})
	}
}

// TestS43RedirectLoopNotPending: S43, a Location that redirects for ever,
// reached through an http.Client whose Transport is idem's. The Client
// stops after its 10th request, with its own error and that request's 307;
// every POST carried the operation's key, and the 307 settled the operation
// where it was sent: nothing is left pending, and Resume sends nothing.
func TestS43RedirectLoopNotPending(t *testing.T) {
	t.Parallel()
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			f := startFront(t, p.h2)
			j, _ := testJournal(t)
			tr, clk := transportOver(t, j, Options{}, f.base(), time.Time{})
			c := &http.Client{Transport: tr}
			resp, err := c.Do(payment(t, f.URL+"/loop/0", "r", "op"))
			require.ErrorAs(t, err, new(*url.Error), "the Client's redirect limit")
			require.NotErrorAs(t, err, new(*PendingError))
			require.NotErrorIs(t, err, ErrKeyReuse)
			require.NotNil(t, resp, "the Client returns the last 307 with its error")
			require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
			require.Len(t, f.seen(), 10)

			rec := onlyRecordIn(t, j)
			info, ok := ResponseInfo(resp)
			require.True(t, ok)
			require.Equal(t, rec.Key, info.Key)
			require.Equal(t, StateSettled, rec.State)
			require.Equal(t, http.StatusTemporaryRedirect, rec.Status)
			require.Equal(t, f.URL+"/loop/9", rec.Target(), "settled where the last 307 came from")
			require.Equal(t, 10, rec.Attempts)
			for _, h := range f.seen() {
				require.Equal(t, []string{rec.Key}, h.Keys)
			}

			clk.Advance(time.Hour)
			require.Empty(t, resumeAll(t, tr))
			require.Len(t, f.seen(), 10, "Resume sends nothing")
		})
	}
}

// TestRedirectLimitResume: a Client that stops following early
// (ErrUseLastResponse after 3 requests) leaves the operation pending at
// the last Location. One Resume pass follows the loop for 10 requests,
// then the 10th redirect settles the operation, and Outcome carries that
// 307; the next pass sends nothing.
func TestRedirectLimitResume(t *testing.T) {
	t.Parallel()
	f := startFront(t, false)
	j := memStore(t)
	tr, clk := transportOver(t, j, Options{}, f.base(), time.Time{})
	c := &http.Client{Transport: tr, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Do(payment(t, f.URL+"/loop/0", "r", "op"))
	require.NoError(t, err)
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	drain(t, resp)
	require.Len(t, f.seen(), 3)
	rec := onlyRecordIn(t, tr.journal)
	require.Equal(t, StatePending, rec.State)
	require.Equal(t, f.URL+"/loop/3", rec.Location)

	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusTemporaryRedirect, outs[0].Response.StatusCode)
	require.Len(t, f.seen(), 13)
	rec = onlyRecordIn(t, tr.journal)
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, http.StatusTemporaryRedirect, rec.Status)
	require.Equal(t, f.URL+"/loop/12", rec.Target())
	for _, h := range f.seen() {
		require.Equal(t, []string{rec.Key}, h.Keys)
	}

	clk.Advance(time.Hour)
	require.Empty(t, resumeAll(t, tr))
	require.Len(t, f.seen(), 13)
}

// TestRedirectLimitClientFollowsOn: a CheckRedirect that allows more than
// 10 redirects meets the operation settled at the 10th: its 11th hop is
// refused (ErrAlreadySettled) and nothing more is sent.
func TestRedirectLimitClientFollowsOn(t *testing.T) {
	t.Parallel()
	f := startFront(t, false)
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
	c := &http.Client{Transport: tr, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 20 {
			return errors.New("stopped after 20 redirects")
		}
		return nil
	}}
	_, err := c.Do(payment(t, f.URL+"/loop/0", "r", "op"))
	require.ErrorIs(t, err, ErrAlreadySettled)
	require.Len(t, f.seen(), 10)
	rec := onlyRecordIn(t, tr.journal)
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, http.StatusTemporaryRedirect, rec.Status)
}

// TestRedirectHopRewritten: a CheckRedirect that changes the hop after a 307
// (another body, or another method) does not get it sent under the
// operation's key: the call returns a *PendingError matching
// ErrRedirectChanged, nothing more reaches the server, and Resume sends the
// journaled request to the Location.
func TestRedirectHopRewritten(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"body", "method"} {
		t.Run(how, func(t *testing.T) {
			f := startFront(t, false)
			j := memStore(t)
			tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
			c := &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
				if how == "method" {
					req.Method, req.Body, req.GetBody, req.ContentLength = http.MethodGet, nil, nil, 0
					return nil
				}
				b := paymentBody("other", 5)
				req.Body, req.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
				return nil
			}}
			_, err := c.Do(payment(t, f.URL+"/307/payments", "r", "op"))
			perr := pendingErr(t, err)
			require.ErrorIs(t, perr, ErrRedirectChanged)
			require.Len(t, f.seen(), 1)

			require.NoError(t, tr.Resume(context.Background(), nil))
			require.Equal(t, 1, f.pay.Ledger().Effects["r"])
			require.Equal(t, 0, f.pay.Ledger().Effects["other"])
			require.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)
		})
	}
}

// TestRedirectToAnotherHost: net/http drops Authorization on a redirect to
// another domain ("localhost" after "127.0.0.1"), and idem never puts it
// back: the hop goes without it, and a record moved there no longer asks
// PrepareResume for it (Record.Dropped); PrepareResume sees the Location.
func TestRedirectToAnotherHost(t *testing.T) {
	t.Parallel()
	t.Run("followed", func(t *testing.T) {
		f := startFront(t, false)
		j := memStore(t)
		tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
		c := &http.Client{Transport: tr}
		req := payment(t, f.URL+"/far/payments", "r", "op")
		req.Header.Set("Authorization", "Bearer secret-1")
		resp, err := c.Do(req)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		hits := f.seen()
		require.Len(t, hits, 2)
		require.Equal(t, "Bearer secret-1", hits[0].Auth)
		require.True(t, strings.HasPrefix(hits[1].Host, "localhost:"), hits[1].Host)
		require.Empty(t, hits[1].Auth)
		require.Equal(t, hits[0].Keys, hits[1].Keys)
		require.Equal(t, 1, f.pay.Ledger().Effects["r"])
	})
	t.Run("resumed", func(t *testing.T) {
		f := startFront(t, false)
		j := memStore(t)
		var sawHost []string
		opts := Options{PrepareResume: func(r *http.Request) error {
			sawHost = append(sawHost, r.URL.Hostname())
			return nil
		}}
		tr, _ := transportOver(t, j, opts, f.base(), time.Time{})
		c := &http.Client{Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req := payment(t, f.URL+"/far/payments", "r", "op")
		req.Header.Set("Authorization", "Bearer secret-1")
		resp, err := c.Do(req)
		require.NoError(t, err)
		drain(t, resp)
		rec := onlyRecordIn(t, tr.journal)
		require.Equal(t, StatePending, rec.State)
		require.Empty(t, rec.Dropped)
		require.True(t, strings.HasPrefix(rec.Location, "http://localhost:"), rec.Location)

		outs := resumeAll(t, tr)
		require.Len(t, outs, 1)
		require.NoError(t, outs[0].Err)
		require.Equal(t, []string{"localhost"}, sawHost)
		hits := f.seen()
		require.Len(t, hits, 2)
		require.Empty(t, hits[1].Auth)
		require.Equal(t, 1, f.pay.Ledger().Effects["r"])
	})
}

// TestRedirectHopAfterSettle: the hop of a 307 that arrives once the
// operation has settled meanwhile (Resume sent it first) is sent again with
// the same key, and the server replays; after KeyTTL it is refused
// (ErrAlreadySettled) with nothing sent. Before redirect.go the hop of an
// operation whose key idem minted was a second operation: two payments.
func TestRedirectHopAfterSettle(t *testing.T) {
	t.Parallel()
	f := startFront(t, false)
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{}, f.base(), time.Time{})
	resp, err := tr.RoundTrip(payment(t, f.URL+"/307/payments", "r", "minted"))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	require.NoError(t, tr.Resume(context.Background(), nil))
	require.Equal(t, 1, f.pay.Ledger().Effects["r"])

	hop := func() *http.Request {
		r := payment(t, f.URL+"/payments", "r", "minted")
		r.Response = resp
		return r
	}
	again, err := tr.RoundTrip(hop())
	require.NoError(t, err)
	drain(t, again)
	require.Equal(t, http.StatusCreated, again.StatusCode)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 1, f.pay.Ledger().Effects["r"])

	clk.Advance(DefaultKeyTTL + time.Minute)
	n := len(f.seen())
	_, err = tr.RoundTrip(hop())
	require.ErrorIs(t, err, ErrAlreadySettled)
	require.Len(t, f.seen(), n)
	require.Len(t, tr.journalRecords(t), 1)
}

// journalRecords lists every record of tr's journal.
func (t *Transport) journalRecords(tb testing.TB) []*Record {
	tb.Helper()
	recs, err := t.bolt().Records()
	require.NoError(tb, err)
	return recs
}

// TestRedirectJournaledGet: a GET or HEAD journaled by WithOperationID meets
// the same table as a POST: a 307 continues the operation at the Location,
// a 301 settles it and the hop is an ordinary GET, never ErrKeyReuse.
func TestRedirectJournaledGet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method   string
		status   int
		settled  int
		location bool
	}{
		{http.MethodGet, 307, 400, true},
		{http.MethodHead, 308, 400, true},
		{http.MethodGet, 301, 301, false},
		{http.MethodHead, 302, 302, false},
	} {
		t.Run(fmt.Sprint(tc.method, tc.status), func(t *testing.T) {
			f := startFront(t, true)
			j := memStore(t)
			tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
			c := &http.Client{Transport: tr}
			ctx := WithOperationID(context.Background(), "look/r")
			req, err := http.NewRequestWithContext(ctx, tc.method, fmt.Sprintf("%s/%d/payments", f.URL, tc.status), nil)
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode) // the list wants a reference
			rec := onlyRecordIn(t, tr.journal)
			require.Equal(t, StateSettled, rec.State)
			require.Equal(t, tc.settled, rec.Status)
			require.Equal(t, tc.location, rec.Location != "")
			hits := f.seen()
			require.Len(t, hits, 2)
			require.Equal(t, tc.method, hits[1].Method)
			if tc.location {
				require.Equal(t, []string{rec.Key}, hits[1].Keys)
			} else {
				require.Empty(t, hits[1].Keys)
			}
		})
	}
}

// TestRedirectWithClientTimeout: an http.Client with a Timeout wraps the
// Body of every response before it follows a redirect, so idem's mark rides
// on the response's Request, not its Body. The chain is still one operation.
func TestRedirectWithClientTimeout(t *testing.T) {
	f := startFront(t, false)
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, f.base(), time.Time{})
	c := &http.Client{Transport: tr, Timeout: time.Minute}
	resp, err := c.Do(payment(t, f.URL+"/307/payments", "r", "minted"))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	rec := onlyRecordIn(t, tr.journal)
	require.Equal(t, http.StatusCreated, rec.Status)
	require.Equal(t, 1, f.pay.Ledger().Effects["r"])
	for _, h := range f.seen() {
		require.Equal(t, []string{rec.Key}, h.Keys)
	}
}

// failover is a primary payments API that, under maintenance, answers every
// POST 307 to a failover region: another server, with its own idempotency
// store (keys scoped by Authorization, as Stripe's are by account), named by
// regionHost ("127.0.0.1", or "localhost": another domain to net/http).
type failover struct {
	front           *httptest.Server
	primary, region *testserver.Server
	maintenance     atomic.Bool

	mu          sync.Mutex
	regionHits  []frontHit
	regionQuery []string // the raw query of each region hit
}

// startFailover starts one under maintenance; its Location is the region's
// URL under regionHost with path (a query included, if any).
func startFailover(tb testing.TB, regionHost, path string) *failover {
	tb.Helper()
	f := &failover{primary: startPayments(tb, nil), region: startPayments(tb, nil)}
	f.maintenance.Store(true)
	region := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.regionHits = append(f.regionHits, frontHit{Method: r.Method, Path: r.URL.Path, Host: r.Host,
			Keys: r.Header.Values(DefaultKeyHeader), Auth: r.Header.Get("Authorization")})
		f.regionQuery = append(f.regionQuery, r.URL.RawQuery)
		f.mu.Unlock()
		f.region.Handler().ServeHTTP(w, r)
	}))
	tb.Cleanup(region.Close)
	location := strings.Replace(region.URL, "127.0.0.1", regionHost, 1) + path
	f.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.maintenance.Load() {
			w.Header().Set("Location", location)
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		f.primary.Handler().ServeHTTP(w, r)
	}))
	tb.Cleanup(f.front.Close)
	return f
}

// effects is the payments made for ref, in the region and the primary.
func (f *failover) effects(ref string) (region, primary int) {
	return f.region.Ledger().Effects[ref], f.primary.Ledger().Effects[ref]
}

func (f *failover) hits() ([]frontHit, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.regionHits), slices.Clone(f.regionQuery)
}

// TestRedirectRecallGoesToLocation: the hop of a 307 reaches the failover
// region, which makes the payment and loses the response: the operation is
// pending at its Location, where the server holds its key. Once the
// maintenance ends, a call that names the operation again (its operation ID
// or caller's key, as the package docs invite after a *PendingError) sends
// it to the Location, as Resume does, and gets the region's replay. Before,
// the call went to the caller's URL, the primary, which never saw the key:
// two payments.
func TestRedirectRecallGoesToLocation(t *testing.T) {
	t.Parallel()
	for _, keying := range []string{"op", "header"} {
		t.Run(keying, func(t *testing.T) {
			f := startFailover(t, "127.0.0.1", "/payments")
			j := memStore(t)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr, clk := transportOver(t, j, Options{MaxAttempts: 1}, base, time.Time{})
			c := &http.Client{Transport: tr}
			f.region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
			_, err := c.Do(payment(t, f.front.URL+"/payments", "r", keying))
			pendingErr(t, err)
			rec := onlyRecordIn(t, tr.journal)
			require.Equal(t, StatePending, rec.State)
			require.True(t, strings.HasSuffix(rec.Location, "/payments"), rec.Location)

			f.maintenance.Store(false)
			clk.Advance(time.Minute) // past the backoff
			resp, err := c.Do(payment(t, f.front.URL+"/payments", "r", keying))
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
			region, primary := f.effects("r")
			require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
			hits, _ := f.hits()
			require.Len(t, hits, 2)
			require.Equal(t, hits[0].Keys, hits[1].Keys)
			require.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)
		})
	}
}

// TestRedirectRecallSettledGoesToLocation: the same with the chain
// completed, the operation settled in the region (201). Called again within
// KeyTTL, it is sent again so the caller gets the server's stored response:
// to the Location, where the region replays it. Before, it went to the
// primary: a second payment.
func TestRedirectRecallSettledGoesToLocation(t *testing.T) {
	f := startFailover(t, "127.0.0.1", "/payments")
	j := memStore(t)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, _ := transportOver(t, j, Options{}, base, time.Time{})
	c := &http.Client{Transport: tr}
	resp, err := c.Do(payment(t, f.front.URL+"/payments", "r", "op"))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)

	f.maintenance.Store(false)
	resp, err = c.Do(payment(t, f.front.URL+"/payments", "r", "op"))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	region, primary := f.effects("r")
	require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
}

// TestRedirectRecallCredentials: a call sent to its operation's Location
// carries the caller's Authorization only where net/http would carry it on
// the hop: on the same domain, not on another ("localhost" after
// "127.0.0.1"). The region scopes keys by Authorization, so either mistake
// would make a second payment, and the credential would reach a domain the
// hop kept it from.
func TestRedirectRecallCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host, auth string // the region's host; the Authorization it gets
	}{{"127.0.0.1", "Bearer secret-1"}, {"localhost", ""}} {
		t.Run(c.host, func(t *testing.T) {
			f := startFailover(t, c.host, "/payments")
			j := memStore(t)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr, clk := transportOver(t, j, Options{MaxAttempts: 1}, base, time.Time{})
			client := &http.Client{Transport: tr}
			call := func() (*http.Response, error) {
				req := payment(t, f.front.URL+"/payments", "r", "op")
				req.Header.Set("Authorization", "Bearer secret-1")
				return client.Do(req)
			}
			f.region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
			_, err := call()
			pendingErr(t, err)

			f.maintenance.Store(false)
			clk.Advance(time.Minute)
			resp, err := call()
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			hits, _ := f.hits()
			require.Len(t, hits, 2)
			for _, h := range hits {
				require.Equal(t, c.auth, h.Auth)
				require.True(t, strings.HasPrefix(h.Host, c.host+":"), h.Host)
			}
			region, primary := f.effects("r")
			require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
		})
	}
}

// TestRedirectRecallSensitiveQuery: the journal keeps no value of a
// SensitiveQueryParams parameter, the Location's included. A call sent to
// its operation's Location gives a parameter the Location names the
// caller's value, on the same domain; it adds none the Location does not
// name; and on another domain it sends nothing (ErrSensitiveQueryMissing,
// still pending) rather than hand the caller's token there.
func TestRedirectRecallSensitiveQuery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, host, path string
		query            string // the region's query on the call; "-" for nothing sent
	}{
		{"named", "127.0.0.1", "/payments?token=from-server&mode=live", "mode=live&token=from-caller"},
		{"not-named", "127.0.0.1", "/payments", ""},
		{"other-domain", "localhost", "/payments?token=from-server", "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := startFailover(t, c.host, c.path)
			j := memStore(t)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr, clk := transportOver(t, j, Options{MaxAttempts: 1, SensitiveQueryParams: []string{"token"}}, base, time.Time{})
			client := &http.Client{Transport: tr}
			call := func() (*http.Response, error) {
				return client.Do(payment(t, f.front.URL+"/payments?token=from-caller", "r", "op"))
			}
			f.region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
			_, err := call()
			pendingErr(t, err)
			rec := onlyRecordIn(t, tr.journal)
			require.NotContains(t, rec.Location, "from-")

			f.maintenance.Store(false)
			clk.Advance(time.Minute)
			resp, err := call()
			hits, query := f.hits()
			if c.query == "-" {
				require.ErrorIs(t, pendingErr(t, err), ErrSensitiveQueryMissing)
				require.Len(t, hits, 1)
				require.Equal(t, StatePending, onlyRecordIn(t, tr.journal).State)
				return
			}
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Len(t, hits, 2)
			require.Equal(t, c.query, query[1])
			region, primary := f.effects("r")
			require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
		})
	}
}

// TestRedirectHopGoesWhereRecordIs: the hop of a 307 and a call that names
// the operation agree: both go where the journal says the operation is. A
// 307 moves it to the primary; before the hop is sent, Resume follows the
// primary's own 307 to the region, which makes the payment and loses the
// response. The late hop then goes to the region, not to the Location it
// was built for, which now takes payments itself. And the hop of a 307
// answered to a settled operation sent again, pointing elsewhere than where
// it settled, is not sent: *AlreadySettledError.
func TestRedirectHopGoesWhereRecordIs(t *testing.T) {
	t.Parallel()
	t.Run("moved-on", func(t *testing.T) {
		f := startFailover(t, "127.0.0.1", "/payments")
		entry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", f.front.URL+"/payments")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}))
		t.Cleanup(entry.Close)
		j := memStore(t)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		tr, clk := transportOver(t, j, Options{MaxAttempts: 1}, base, time.Time{})
		moved, err := tr.RoundTrip(payment(t, entry.URL+"/pay", "r", "op"))
		require.NoError(t, err)
		drain(t, moved)
		require.Equal(t, http.StatusTemporaryRedirect, moved.StatusCode)

		f.region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
		require.NoError(t, tr.Resume(context.Background(), func(o Outcome) { pendingErr(t, o.Err) }))
		require.Equal(t, 1, f.region.Ledger().Effects["r"])
		f.maintenance.Store(false)
		clk.Advance(time.Minute)

		hop := payment(t, f.front.URL+"/payments", "r", "op")
		hop.Response = moved
		resp, err := tr.RoundTrip(hop)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		region, primary := f.effects("r")
		require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
	})
	t.Run("settled-elsewhere", func(t *testing.T) {
		f := startFailover(t, "127.0.0.1", "/payments")
		f.maintenance.Store(false)
		j := memStore(t)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		tr, _ := transportOver(t, j, Options{}, base, time.Time{})
		c := &http.Client{Transport: tr}
		resp, err := c.Do(payment(t, f.front.URL+"/payments", "r", "op"))
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)

		f.maintenance.Store(true)
		_, err = c.Do(payment(t, f.front.URL+"/payments", "r", "op"))
		var settled *AlreadySettledError
		require.ErrorAs(t, err, &settled)
		require.Equal(t, http.StatusCreated, settled.Status)
		hits, _ := f.hits()
		require.Empty(t, hits)
		region, primary := f.effects("r")
		require.Equal(t, [2]int{0, 1}, [2]int{region, primary}, "payments in the region and the primary")
	})
}
