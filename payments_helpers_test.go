// Helpers for the tests that run against testserver (S16-S23, operation IDs,
// bodies): a payments server, a base RoundTripper that logs what every attempt
// carried onto the wire, and request builders.

package idem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// startPayments starts a testserver, closed at the end of the test.
func startPayments(tb testing.TB, opts *testserver.Options) *testserver.Server {
	tb.Helper()
	srv := testserver.NewServer(opts)
	tb.Cleanup(srv.Close)
	return srv
}

// paymentBody is the JSON body of POST /payments.
func paymentBody(ref string, amount int) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"eur","reference":%q}`, amount, ref)
}

// paymentRequest builds POST {base}/payments with ctx and a body that is a
// countingBody, so a test can check how often RoundTrip closed it.
func paymentRequest(tb testing.TB, ctx context.Context, base, ref string, amount int) (*http.Request, *countingBody) {
	tb.Helper()
	body := &countingBody{Reader: bytes.NewReader([]byte(paymentBody(ref, amount)))}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/payments", body)
	require.NoError(tb, err)
	req.Header.Set("Content-Type", "application/json")
	return req, body
}

// wireAttempt is what one attempt carried onto the wire.
type wireAttempt struct {
	Keys          []string // every value of the key header, whatever its spelling
	Body          []byte
	ContentLength int64
}

// wireLog is a base RoundTripper that records every attempt, then sends it
// through its own http.Transport. If intercept is set and returns a response
// or an error, that is the attempt's result and nothing is sent. It is safe
// for concurrent use.
type wireLog struct {
	next      *http.Transport
	intercept func(r *http.Request, key string) (*http.Response, error)

	mu       sync.Mutex
	attempts []wireAttempt
}

// newWireLog returns a wireLog whose idle connections close with the test.
func newWireLog(tb testing.TB) *wireLog {
	w := &wireLog{next: &http.Transport{}}
	tb.Cleanup(w.next.CloseIdleConnections)
	return w
}

func (w *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	keys := headerValues(r.Header, DefaultKeyHeader)
	w.mu.Lock()
	w.attempts = append(w.attempts, wireAttempt{Keys: keys, Body: body, ContentLength: r.ContentLength})
	w.mu.Unlock()
	if w.intercept != nil {
		key := ""
		if len(keys) == 1 {
			key = keys[0]
		}
		if resp, err := w.intercept(r, key); resp != nil || err != nil {
			return resp, err
		}
	}
	out := r.Clone(r.Context())
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.Body, _ = out.GetBody()
	if body == nil {
		out.Body, out.GetBody = http.NoBody, nil
	}
	return w.next.RoundTrip(out)
}

// sent returns a copy of the attempts logged so far.
func (w *wireLog) sent() []wireAttempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]wireAttempt(nil), w.attempts...)
}

// requireOneKey asserts every logged attempt carried exactly one key header,
// with value key.
func (w *wireLog) requireOneKey(tb testing.TB, key string) {
	tb.Helper()
	sent := w.sent()
	require.NotEmpty(tb, sent)
	for i, a := range sent {
		require.Equal(tb, []string{key}, a.Keys, "attempt %d", i+1)
	}
}

// synthetic returns a response as a server would, for intercept.
func synthetic(r *http.Request, status int) *http.Response {
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header), Body: http.NoBody, Request: r,
	}
}

// transportOn builds a Transport over the bbolt journal j that sends through
// base, with a fake clock that starts at start (the zero time means now).
func transportOn(tb testing.TB, j *boltjournal.Journal, opts Options, base http.RoundTripper, start time.Time) (*Transport, *fakeClock) {
	tb.Helper()
	return transportOver(tb, j, opts, base, start)
}

// transportOver is transportOn over any Store: memStore(tb) for a test that
// needs no file.
func transportOver(tb testing.TB, s journal.Store, opts Options, base http.RoundTripper, start time.Time) (*Transport, *fakeClock) {
	tb.Helper()
	opts.Base = base
	opts.Journal = boltjournal.Options{} // the journal's, applied when it was opened
	tr, err := NewTransport(s, &opts)
	require.NoError(tb, err)
	clk := newFakeClock()
	if !start.IsZero() {
		clk.now = start
	}
	tr.clock = clk
	return tr, clk
}

// reopen closes j and opens the journal at the same path again, as a
// restarted process would. The new journal closes with the test.
func reopen(tb testing.TB, j *boltjournal.Journal) *boltjournal.Journal {
	tb.Helper()
	require.NoError(tb, j.Close())
	j2, err := boltjournal.Open(j.Path(), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { j2.Close() })
	return j2
}

// drain reads and closes a response body and returns it.
func drain(tb testing.TB, resp *http.Response) []byte {
	tb.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return b
}

// pendingErr asserts err is a *PendingError and returns it.
func pendingErr(tb testing.TB, err error) *PendingError {
	tb.Helper()
	var perr *PendingError
	require.ErrorAs(tb, err, &perr)
	return perr
}

// fastJournal is testJournal without the path: a bbolt journal on a RAM
// file system when there is one, for tests about concurrency rather than
// durability.
func fastJournal(tb testing.TB) *boltjournal.Journal {
	tb.Helper()
	j, _ := testJournal(tb)
	return j
}
