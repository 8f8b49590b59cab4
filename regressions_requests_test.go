// Regression tests for defects found in review, about single requests: what
// RoundTrip accepts, refuses, reads and journals (the Host override included),
// and how it copes with odd bases and classifiers. regressions_test.go holds the ones about an
// operation's life across calls and Resume.

package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// roundTripFunc is a base RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// pipeBody is a request body that blocks until its writer writes, and counts
// its Close calls; Close unblocks a pending Read.
type pipeBody struct {
	*io.PipeReader
	closes atomic.Int32
}

func (b *pipeBody) Close() error {
	b.closes.Add(1)
	return b.PipeReader.Close()
}

// noRequests asserts that nothing was journaled and nothing reached srv.
func noRequests(tb testing.TB, tr *Transport, srv *recordingServer) {
	tb.Helper()
	recs, err := tr.bolt().Records()
	require.NoError(tb, err)
	require.Empty(tb, recs, "nothing journaled")
	require.Zero(tb, srv.count(), "nothing sent")
}

func created(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) }

func TestPermanentClassOnResponseSettles(t *testing.T) {
	// A Classifier may call a response ClassPermanent; the server answered, so
	// the answer is the outcome.
	classifier := func(a Attempt) Class {
		if a.Response != nil && a.Response.StatusCode == http.StatusBadRequest {
			return ClassPermanent
		}
		return DefaultClassifier(a)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			tr, _, srv := newScenario(t, &Options{Classifier: classifier}, func(_ int, w http.ResponseWriter, _ *http.Request) {
				reply(w, http.StatusBadRequest)
			})
			var resp *http.Response
			var err error
			require.NotPanics(t, func() {
				resp, err = tr.RoundTrip(newRequest(t, method, srv.URL+"/payments", paymentBody("order-r5", 500)))
			})
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			require.Equal(t, http.StatusText(http.StatusBadRequest), string(drain(t, resp)))
			require.Equal(t, 1, srv.count())
			if method == http.MethodPost {
				rec := onlyRecord(t, tr)
				require.Equal(t, StateSettled, rec.State)
				require.Equal(t, http.StatusBadRequest, rec.Status)
			}
		})
	}
}

func TestNilHeaderMapJournaled(t *testing.T) {
	tr, _, srv := newScenario(t, nil, created)
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r7", 700))
	req.Header = nil
	var resp *http.Response
	var err error
	require.NotPanics(t, func() { resp, err = tr.RoundTrip(req) })
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, onlyRecord(t, tr).Key, sameKey(t, srv.requests()))
	require.Nil(t, req.Header, "the caller's request is not modified")
}

func TestBlockingBodyHonoursDeadline(t *testing.T) {
	tr, _, srv := newScenario(t, nil, created)
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	body := &pipeBody{PipeReader: pr}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments", body)
	require.NoError(t, err)

	start := time.Now()
	select {
	case res := <-roundTripAsync(tr, req):
		require.Less(t, time.Since(start), time.Second)
		require.Nil(t, res.resp)
		require.ErrorIs(t, res.err, context.DeadlineExceeded)
		require.False(t, errors.As(res.err, new(*PendingError)), "nothing was written, so nothing is pending")
	case <-time.After(2 * time.Second):
		pw.CloseWithError(errors.New("test gave up")) // let RoundTrip return
		t.Fatal("RoundTrip still reading the body 1.9 s past the context deadline")
	}
	noRequests(t, tr, srv)
	require.EqualValues(t, 1, body.closes.Load())
}

func TestMaxBodyBytesMaxInt64SendsWholeBody(t *testing.T) {
	want := bytes.Repeat([]byte(paymentBody("order-r9", 900)), 1000)
	sum := sha256.Sum256(want)
	tests := []struct {
		name string
		req  func(url string) *http.Request
	}{
		{"unknown length", func(url string) *http.Request {
			req := newRequest(t, http.MethodPost, url, "")
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(want)), -1
			return req
		}},
		{"reader http.NewRequest cannot measure", func(url string) *http.Request {
			req, err := http.NewRequest(http.MethodPost, url, struct{ io.Reader }{bytes.NewReader(want)})
			require.NoError(t, err)
			return req
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _, srv := newScenario(t, &Options{MaxBodyBytes: math.MaxInt64}, created)
			resp, err := tr.RoundTrip(tt.req(srv.URL + "/payments"))
			require.NoError(t, err)
			drain(t, resp)
			seen := srv.requests()
			require.Len(t, seen, 1)
			sameBytes(t, want, seen[0].Body)
			require.Equal(t, hex.EncodeToString(sum[:]), onlyRecord(t, tr).BodySHA256)
		})
	}
}

func TestUnsendableRequestRefusedUpFront(t *testing.T) {
	tests := []struct {
		name string
		edit func(*http.Request) *http.Request
	}{
		{"header name with a space", func(r *http.Request) *http.Request {
			r.Header["Bad Header"] = []string{"x"}
			return r
		}},
		{"header value with CR", func(r *http.Request) *http.Request {
			r.Header.Set("X-Note", "a\rb")
			return r
		}},
		{"header value with LF", func(r *http.Request) *http.Request {
			r.Header.Set("X-Note", "a\nX-Injected: 1")
			return r
		}},
		{"method with a space", func(r *http.Request) *http.Request {
			// With an operation ID it would be journaled, were it accepted.
			r = r.WithContext(WithOperationID(r.Context(), "op-r10"))
			r.Method = "BAD METHOD"
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk, srv := newScenario(t, nil, created)
			req, body := paymentRequest(t, context.Background(), srv.URL, "order-r10", 1000)
			resp, err := tr.RoundTrip(tt.edit(req))
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrInvalidRequest)
			noRequests(t, tr, srv)
			require.Empty(t, clk.Sleeps(), "refused, not retried")
			require.EqualValues(t, 1, body.closes.Load())
		})
	}
}

func TestBrokenBaseNoPanic(t *testing.T) {
	t.Run("nil response and nil error", func(t *testing.T) {
		j, _ := testJournal(t)
		base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
		tr, _ := transportOn(t, j, Options{MaxAttempts: 2}, base, time.Time{})
		var resp *http.Response
		var err error
		require.NotPanics(t, func() {
			resp, err = tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1:1/payments", paymentBody("order-r11", 1100)))
		})
		require.Nil(t, resp)
		require.Error(t, err)
		require.Equal(t, 2, pendingErr(t, err).Attempts)
	})
	t.Run("response with nil Body", func(t *testing.T) {
		j, _ := testJournal(t)
		var n atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp := synthetic(r, http.StatusServiceUnavailable) // discarded: drained and closed
			if n.Add(1) > 1 {
				resp = synthetic(r, http.StatusCreated)
			}
			resp.Body = nil
			return resp, nil
		})
		tr, _ := transportOn(t, j, Options{}, base, time.Time{})
		require.NotPanics(t, func() {
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1:1/payments", paymentBody("order-r11", 1100)))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Empty(t, drain(t, resp))
		})
		require.EqualValues(t, 2, n.Load())
		require.Equal(t, StateSettled, onlyRecordOf(t, j).State)
	})
}

func TestHostOverrideJournaledAndResumed(t *testing.T) {
	var mu sync.Mutex
	var hosts []string
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		if n == 1 {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r17", 1700))
	req.Host = "payments.example"
	_, err := tr.RoundTrip(req)
	perr := pendingErr(t, err)
	require.Equal(t, "payments.example", onlyRecord(t, tr).Host)

	// A restart: the record is all the new process has.
	tr2, _ := transportOn(t, reopen(t, tr.bolt()), Options{}, srv.base(), perr.NextAttempt.Add(time.Millisecond))
	outs := resumeAll(t, tr2)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"payments.example", "payments.example"}, hosts)
}

func TestOpaqueURLUserinfoNotJournaled(t *testing.T) {
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 1}, created)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r12", 1200))
	req.URL = &url.URL{Scheme: "http", Host: u.Host, Opaque: "//user:S3CR3T@" + u.Host + "/payments"}
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "http://"+u.Host+"/payments", onlyRecord(t, tr).URL)

	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte("S3CR3T")), "the password is in the journal file")
}

func TestCanceledContextJournalsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr, _, srv := newScenario(t, nil, created)
	req, body := paymentRequest(t, ctx, srv.URL, "order-r15", 1500)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.As(err, new(*PendingError)), "nothing to resume")
	noRequests(t, tr, srv)
	require.EqualValues(t, 1, body.closes.Load())
}

func TestEmptyMethodIsGET(t *testing.T) {
	// "" means GET (net/http): idempotent, so not journaled, and retried
	// even when the connection fails after the request was written.
	tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1: // on a fresh connection, so net/http does not retry it itself
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case 2:
			reply(w, http.StatusServiceUnavailable)
		default:
			reply(w, http.StatusOK)
		}
	})
	req := newRequest(t, http.MethodGet, srv.URL+"/payments/p1", "")
	req.Method = ""
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, clk.Sleeps(), 2)

	recs, err := tr.bolt().Records()
	require.NoError(t, err)
	require.Empty(t, recs, "a GET is not journaled")
	seen := srv.requests()
	require.Len(t, seen, 3)
	for i, r := range seen {
		require.Equal(t, http.MethodGet, r.Method, "attempt %d", i+1)
		require.Empty(t, r.Header.Values(DefaultKeyHeader), "attempt %d", i+1)
	}
}
