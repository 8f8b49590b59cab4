// Tests for Handler on a bbolt journal in use by a Transport in the same
// test: what the view shows of operations settled, pending and in flight;
// that it never shows a body, a credential or sealed content; that it is
// read-only.

package journalhttp_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/journalhttp"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// mount is the path the tests mount the view at, as a service would.
const mount = "/debug/idem/journal"

// secrets are what a request carries that the view must never show.
var secrets = []string{
	"SECRET-BODY-4111",        // in the body
	"SECRET-AUTH-TOKEN",       // Authorization: never journaled
	"SECRET-COOKIE",           // Cookie: never journaled
	"SECRET-QUERY-API-KEY",    // a SensitiveQueryParams value: never journaled
	"SECRET-QUERY-PLAIN",      // an ordinary query value: journaled, never shown
	"SECRET-HEADER-VALUE",     // an ordinary header's value: journaled, never shown
	"SECRET-TENANT",           // the declared identity: journaled (sealed), never shown
	"SECRET-CONTENT-TYPE-ARG", // a representation header's parameter
}

// paymentRequest is a payment whose every part carries a secret.
func paymentRequest(t *testing.T, url, op string) *http.Request {
	t.Helper()
	ctx := idem.WithIdentity(idem.WithOperationID(context.Background(), op), "SECRET-TENANT")
	body := `{"amount":1250,"currency":"eur","reference":"` + op + `","card":"SECRET-BODY-4111"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		url+"/payments?api_key=SECRET-QUERY-API-KEY&ref=SECRET-QUERY-PLAIN", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer SECRET-AUTH-TOKEN")
	req.Header.Set("Cookie", "session=SECRET-COOKIE")
	req.Header.Set("X-Api-Key", "SECRET-HEADER-VALUE")
	req.Header.Set("Content-Type", "application/json; note=SECRET-CONTENT-TYPE-ARG")
	return req
}

// bodySums are the SHA-256 of each payment's body, in hex: sealed content
// too (a short body's hash can be tested against guesses).
func bodySum(op string) string {
	return journal.BodySum([]byte(`{"amount":1250,"currency":"eur","reference":"` + op + `","card":"SECRET-BODY-4111"}`))
}

// live is a bbolt journal held open by a Transport, with the view mounted
// on a mux of its own.
type live struct {
	j    *boltjournal.Journal
	srv  *testserver.Server
	http *http.Client // through the Transport
	view *httptest.Server
}

func newLive(t *testing.T) *live {
	t.Helper()
	key := make([]byte, boltjournal.KeySize)
	rand.Read(key)
	j, err := boltjournal.Open(filepath.Join(t.TempDir(), "live.journal"),
		&boltjournal.Options{Encryption: &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": key}}})
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	tr, err := idem.NewTransport(j, &idem.Options{MaxAttempts: 1, AttemptTimeout: time.Minute,
		SensitiveQueryParams: []string{"api_key"}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(mount, journalhttp.Handler(j, &journalhttp.Options{Name: "live.journal"}))
	view := httptest.NewServer(mux)
	t.Cleanup(view.Close)
	return &live{j: j, srv: srv, http: &http.Client{Transport: tr}, view: view}
}

// call sends op's payment and returns its status, or 0 and the error.
func (l *live) call(t *testing.T, op string) (int, error) {
	t.Helper()
	resp, err := l.http.Do(paymentRequest(t, l.srv.URL, op))
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// fetch sends method to the view at path and returns the response with its
// raw bytes, headers and body, as they came off the wire.
func fetch(t *testing.T, base, method, path string, reqBody io.Reader) (_ *http.Response, raw, body []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, reqBody)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err = httputil.DumpResponse(resp, true) // puts the body back
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, raw, body
}

// noSecrets fails t if raw holds a secret or one of the bodies' hashes.
func noSecrets(t *testing.T, what string, raw []byte, sums ...string) {
	t.Helper()
	for _, s := range append(secrets, sums...) {
		require.NotContains(t, string(raw), s, "%s shows %q:\n%s", what, s, raw)
	}
}

// journaled checks that the journal holds op's journaled secrets (the view
// has them to leave out) and not those idem never journals.
func journaled(t *testing.T, j *boltjournal.Journal, op string) {
	t.Helper()
	rec, err := j.Lookup(op)
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Contains(t, string(rec.Body), "SECRET-BODY-4111")
	require.Contains(t, rec.URL, "SECRET-QUERY-PLAIN")
	require.NotContains(t, rec.URL, "SECRET-QUERY-API-KEY")
	require.Equal(t, "SECRET-HEADER-VALUE", rec.Header.Get("X-Api-Key"))
	require.Empty(t, rec.Header.Get("Authorization"))
	require.Equal(t, "SECRET-TENANT", rec.Identity)
	require.Contains(t, rec.ContentType, "SECRET-CONTENT-TYPE-ARG")
	require.Equal(t, bodySum(op), rec.BodySHA256)
}

// decode reads a JSON view.
func decode(t *testing.T, body []byte) *journalhttp.View {
	t.Helper()
	var v journalhttp.View
	require.NoError(t, json.Unmarshal(body, &v), "%s", body)
	return &v
}

// byOp returns the view's operations by operation ID.
func byOp(v *journalhttp.View) map[string]journalhttp.Entry {
	m := map[string]journalhttp.Entry{}
	for _, e := range v.Operations {
		m[e.OperationID] = e
	}
	return m
}

// The view of a live journal: one payment settled, one pending after a
// 503 with a Retry-After, one in flight at the server right now. Each shows
// its state, attempts (0+? for the one in flight: its attempt is not
// recorded yet) and next attempt; the counts add up; nothing secret shows,
// in any form or filter.
func TestHandlerOnLiveBoltJournal(t *testing.T) {
	l := newLive(t)
	l.srv.Script(testserver.Fault{},
		testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable, RetryAfter: "30"},
		testserver.Fault{Kind: testserver.FaultHold, Delay: time.Minute})
	status, err := l.call(t, "order-1/settled")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	_, err = l.call(t, "order-2/pending")
	var pe *idem.PendingError
	require.ErrorAs(t, err, &pe)
	inFlight := make(chan error, 1)
	go func() { _, err := l.call(t, "order-3/in-flight"); inFlight <- err }()
	require.Eventually(t, func() bool { return l.srv.Ledger().Faults["hold"] == 1 }, 10*time.Second, 5*time.Millisecond,
		"the third payment reaches the server")

	journaled(t, l.j, "order-2/pending")
	sums := []string{bodySum("order-1/settled"), bodySum("order-2/pending"), bodySum("order-3/in-flight")}
	resp, raw, body := fetch(t, l.view.URL, http.MethodGet, mount+"?format=json", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	noSecrets(t, "the JSON view", raw, sums...)
	v := decode(t, body)
	require.Equal(t, "live.journal", v.Journal)
	require.Equal(t, map[string]int{"pending": 2, "settled": 1, "expired": 0, "failed": 0}, v.Counts)
	require.False(t, v.Partial)
	require.Equal(t, 3, v.Matched)
	require.Len(t, v.Operations, 3)
	require.Equal(t, []string{"pending", "pending", "settled"},
		[]string{v.Operations[0].State, v.Operations[1].State, v.Operations[2].State}, "pending first")
	ops := byOp(v)
	settled, pending, flying := ops["order-1/settled"], ops["order-2/pending"], ops["order-3/in-flight"]
	require.Equal(t, 201, settled.Status)
	require.Equal(t, 1, settled.Attempts)
	require.False(t, settled.AttemptsUncertain)
	require.Equal(t, 503, pending.Status)
	require.Equal(t, 1, pending.Attempts)
	require.True(t, pending.AttemptsUncertain)
	require.WithinDuration(t, time.Now().Add(30*time.Second), pending.NextAttempt, 10*time.Second, "due after the Retry-After")
	require.Equal(t, pending.NextAttempt, v.NextAttempt)
	require.Equal(t, 0, flying.Attempts, "the attempt at the server is not recorded until the call ends")
	require.True(t, flying.AttemptsUncertain)
	require.Equal(t, "order-2/pending", v.OldestPending.OperationID)
	for _, e := range v.Operations {
		require.Equal(t, l.srv.URL+"/payments?…", e.URL, "the query is cut")
		require.Equal(t, []string{"Authorization", "Cookie"}, e.Dropped)
		require.Equal(t, []string{"api_key"}, e.DroppedQuery)
		require.Equal(t, "k1", e.EncryptionKeyID)
		require.False(t, e.Sealed, "the service's journal opens its records; the view shows them as if it could not")
		require.NotEmpty(t, e.Key)
	}

	resp, raw, body = fetch(t, l.view.URL, http.MethodGet, mount, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	noSecrets(t, "the text view", raw, sums...)
	text := string(body)
	require.Contains(t, text, "journal        live.journal\n")
	require.Contains(t, text, "records        3: 2 pending, 1 settled, 0 expired, 0 failed\n")
	require.Contains(t, text, "oldest pending order-2/pending (id ")
	require.Contains(t, text, "next attempt   "+v.NextAttempt.UTC().Format(time.RFC3339))
	require.Regexp(t, `\n\d+\s+pending\s+order-2/pending\s+\S+\s+POST \S+/payments\?…\s+1\+\?\s+503\s`, text)
	require.Regexp(t, `\n\d+\s+pending\s+order-3/in-flight\s+\S+\s+POST \S+/payments\?…\s+0\+\?\s+-\s`, text)
	require.Regexp(t, `\n\d+\s+settled\s+order-1/settled\s+\S+\s+POST \S+/payments\?…\s+1\s+201\s`, text)
	require.Contains(t, text, "3 record(s)\n")

	for _, path := range []string{"?state=pending", "?state=settled,failed&format=json", "?op=order-3*",
		"?op=order-1/settled&format=json", "?limit=1", "?limit=1&format=json", "?format=text"} {
		resp, raw, _ := fetch(t, l.view.URL, http.MethodGet, mount+path, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, raw)
		noSecrets(t, path, raw, sums...)
	}
	resp, raw, body = fetch(t, l.view.URL, http.MethodHead, mount, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, body)
	noSecrets(t, "HEAD", raw, sums...)

	l.srv.ReleaseHolds()
	require.NoError(t, <-inFlight)
	_, _, body = fetch(t, l.view.URL, http.MethodGet, mount+"?format=json&op=order-3/in-flight", nil)
	e := decode(t, body).Operations[0]
	require.Equal(t, []any{"settled", 1, false}, []any{e.State, e.Attempts, e.AttemptsUncertain}, "recorded once the call ended")
}
