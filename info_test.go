// Tests for info.go: every response idem returns names the call behind it,
// whatever path returned it.

package idem

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResponseInfo(t *testing.T) {
	t.Parallel()
	const wire = "(the key the server saw)"
	cases := []struct {
		name string
		opts *Options
		// call returns the response under test; tr and srv are the case's own.
		call func(t *testing.T, tr *Transport, clk *fakeClock, url string) *http.Response
		want Info
	}{
		{
			name: "minted key",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-1", 1)))
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: wire, Journaled: true},
		},
		{
			name: "caller key in the header",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-2", 1))
				req.Header.Set(DefaultKeyHeader, "caller-key-2")
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: "caller-key-2", Journaled: true},
		},
		{
			name: "WithKey on a GET journals it",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodGet, url+"/payments/1", "")
				req = req.WithContext(WithKey(req.Context(), "caller-key-3"))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: "caller-key-3", Journaled: true},
		},
		{
			name: "WithOperationID",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-4", 1))
				req = req.WithContext(WithOperationID(req.Context(), "order-4/charge"))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: wire, OperationID: "order-4/charge", Journaled: true},
		},
		{
			name: "a settled operation called again (the server replays)",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				send := func() *http.Response {
					req := newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-5", 1))
					req = req.WithContext(WithOperationID(req.Context(), "order-5/charge"))
					resp, err := tr.RoundTrip(req)
					require.NoError(t, err)
					return resp
				}
				drain(t, send())
				return send()
			},
			want: Info{Key: wire, OperationID: "order-5/charge", Journaled: true},
		},
		{
			name: "unjournaled GET",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, url+"/payments/1", ""))
				require.NoError(t, err)
				return resp
			},
			want: Info{},
		},
		{
			name: "WithoutJournal POST: a key in memory only",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-7", 1))
				req = req.WithContext(WithoutJournal(req.Context()))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: wire},
		},
		{
			name: "an http.Client following a 307",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/redirect", paymentBody("info-8", 1))
				req = req.WithContext(WithOperationID(req.Context(), "order-8/charge"))
				resp, err := (&http.Client{Transport: tr}).Do(req)
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, resp.StatusCode)
				return resp
			},
			want: Info{Key: wire, OperationID: "order-8/charge", Journaled: true},
		},
		{
			name: "Resume's Outcome.Response",
			opts: &Options{MaxAttempts: 1},
			call: func(t *testing.T, tr *Transport, clk *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/flaky", paymentBody("info-9", 1))
				req = req.WithContext(WithOperationID(req.Context(), "order-9/charge"))
				_, err := tr.RoundTrip(req)
				pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
				var resp *http.Response
				require.NoError(t, tr.Resume(context.Background(), func(o Outcome) {
					require.NoError(t, o.Err)
					resp = o.Response
				}))
				require.NotNil(t, resp)
				return resp
			},
			want: Info{Key: wire, OperationID: "order-9/charge", Journaled: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, clk, srv := memScenario(t, tc.opts, func(n int, w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/redirect":
					w.Header().Set("Location", "/payments")
					reply(w, http.StatusTemporaryRedirect)
				case r.URL.Path == "/flaky" && n == 1:
					reply(w, http.StatusServiceUnavailable)
				case r.Method == http.MethodGet:
					reply(w, http.StatusOK)
				default:
					reply(w, http.StatusCreated)
				}
			})
			resp := tc.call(t, tr, clk, srv.URL)
			drain(t, resp)
			want := tc.want
			if want.Key == wire {
				want.Key = sameKey(t, srv.requests())
			}
			for _, r := range srv.requests() {
				require.Equal(t, want.Key, r.Header.Get(DefaultKeyHeader), "the key on the wire")
			}
			got, ok := ResponseInfo(resp)
			require.True(t, ok, "a response idem returned")
			require.Equal(t, want, got)
		})
	}
}

// A response idem did not return, or none, has no Info.
func TestResponseInfoNone(t *testing.T) {
	t.Parallel()
	_, ok := ResponseInfo(nil)
	require.False(t, ok)
	_, ok = ResponseInfo(&http.Response{})
	require.False(t, ok)
	req := newRequest(t, http.MethodPost, "http://127.0.0.1/payments", "")
	_, ok = ResponseInfo(&http.Response{Request: req})
	require.False(t, ok)
}

// A base RoundTripper may answer with a response whose Request is not the
// attempt's (none, or a copy without its context): the Info is still found,
// on the request idem sent.
func TestResponseInfoForeignRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  func(sent *http.Request) *http.Request
	}{
		{"nil", func(*http.Request) *http.Request { return nil }},
		{"other context", func(sent *http.Request) *http.Request { return sent.WithContext(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: tc.req(r)}, nil
			})
			tr, _ := memTransport(t, &Options{Base: base})
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1/payments", `{"a":1}`))
			require.NoError(t, err)
			resp.Body.Close()
			info, ok := ResponseInfo(resp)
			require.True(t, ok)
			require.True(t, info.Journaled)
			require.Len(t, info.Key, 36)
		})
	}
}

// Until the call returns it, a response has no Info: a Classifier (or a
// base RoundTripper) looking at an attempt's response sees what it would
// for a response idem did not return.
func TestResponseInfoOnlyOnceReturned(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		status := http.StatusServiceUnavailable
		if calls.Add(1) > 1 {
			status = http.StatusCreated
		}
		return &http.Response{StatusCode: status, Body: http.NoBody, Request: r}, nil
	})
	var seen []bool
	classify := func(a Attempt) Class {
		_, ok := ResponseInfo(a.Response)
		seen = append(seen, ok)
		return DefaultClassifier(a)
	}
	tr, _ := memTransport(t, &Options{Base: base, Classifier: classify})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1/payments", `{"a":1}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, []bool{false, false}, seen, "the 503's and the 201's Info while the call ran")
	info, ok := ResponseInfo(resp)
	require.True(t, ok)
	require.True(t, info.Journaled)
}
