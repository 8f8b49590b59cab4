// Tests for key.go as RoundTrip applies it: a caller's idempotency key or
// operation ID that is not 1..255 visible ASCII characters, or a request with
// two keys, is refused before anything is written or sent.

package idem

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

func TestInvalidCallerKeyRefused(t *testing.T) {
	t.Parallel()
	header := func(k string) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request { r.Header["Idempotency-Key"] = []string{k}; return r }
	}
	withKey := func(k string) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request { return r.WithContext(WithKey(r.Context(), k)) }
	}
	tests := []struct {
		name   string
		method string
		set    func(*http.Request) *http.Request
	}{
		{"empty header", http.MethodPost, header("")},
		{"empty WithKey", http.MethodPost, withKey("")},
		{"256 characters", http.MethodPost, header(strings.Repeat("k", 256))},
		{"256 characters WithKey", http.MethodPost, withKey(strings.Repeat("k", 256))},
		{"CR", http.MethodPost, header("abc\rdef")},
		{"LF", http.MethodPost, header("abc\ndef")},
		{"CRLF header injection", http.MethodPost, withKey("abc\r\nX-Injected: 1")},
		{"NUL", http.MethodPost, header("abc\x00")},
		{"tab", http.MethodPost, header("abc\tdef")},
		{"DEL", http.MethodPost, header("abc\x7f")},
		{"non-ASCII", http.MethodPost, header("clé-ключ")},
		{"non-ASCII WithKey", http.MethodPost, withKey("k\xffey")},
		{"leading space", http.MethodPost, header(" abc")},
		{"two Idempotency-Key headers", http.MethodPost, func(r *http.Request) *http.Request {
			r.Header.Add("Idempotency-Key", "key-one")
			r.Header.Add("Idempotency-Key", "key-two")
			return r
		}},
		{"one key in two spellings", http.MethodPost, func(r *http.Request) *http.Request {
			r.Header["Idempotency-Key"] = []string{"key-one"}
			r.Header["idempotency-key"] = []string{"key-one"}
			return r
		}},
		{"empty operation ID", http.MethodPost, func(r *http.Request) *http.Request {
			return r.WithContext(WithOperationID(r.Context(), ""))
		}},
		{"operation ID with LF", http.MethodPost, func(r *http.Request) *http.Request {
			return r.WithContext(WithOperationID(r.Context(), "order-1\ncharge"))
		}},
		{"invalid key on a journaled PATCH", http.MethodPatch, header("abc\rdef")},
		// Visible ASCII only, as the server middleware refuses a key with a space.
		{"key with a space", http.MethodPost, header("inner space")},
		// Not journaled, but the key still goes on the wire: the same rules.
		{"empty header on a PUT", http.MethodPut, header("")},
		{"LF on a PUT", http.MethodPut, header("abc\ndef")},
		{"two keys on a DELETE", http.MethodDelete, func(r *http.Request) *http.Request {
			r.Header.Add("Idempotency-Key", "key-one")
			r.Header.Add("Idempotency-Key", "key-two")
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := newWireLog(t)
			wire.intercept = func(r *http.Request, _ string) (*http.Response, error) {
				return synthetic(r, http.StatusCreated), nil
			}
			j := memStore(t)
			tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
			req, body := paymentRequest(t, context.Background(), "http://127.0.0.1:9", "order-k", 1)
			req.Method = tt.method
			req = tt.set(req)

			resp, err := tr.RoundTrip(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrInvalidKey)
			require.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed once")
			require.Empty(t, wire.sent(), "nothing sent")
			recs, err := j.Records()
			require.NoError(t, err)
			require.Empty(t, recs, "nothing written")
		})
	}
}

// An operation ID may hold spaces inside: it never goes on the wire.
func TestOperationIDWithSpaces(t *testing.T) {
	t.Parallel()
	require.NoError(t, validateOperationID("charge order 4827"))
	for _, id := range []string{" lead", "trail ", "tab\tinside"} {
		require.ErrorIs(t, validateOperationID(id), ErrInvalidKey, "%q", id)
	}
}

func TestCallerKeyLimitsAccepted(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"k",
		strings.Repeat("k", 255),
		`"quoted"/with~every!visible#char`,
	} {
		wire := newWireLog(t)
		wire.intercept = func(r *http.Request, _ string) (*http.Response, error) {
			return synthetic(r, http.StatusCreated), nil
		}
		j := memStore(t)
		tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), "http://127.0.0.1:9", "order-k", 1)
		req.Header.Set("Idempotency-Key", key)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err, "%q", key)
		resp.Body.Close()
		wire.requireOneKey(t, key)
		require.Equal(t, key, onlyRecordIn(t, j).Key)
	}
}

// status503 refuses one request before processing, without Retry-After.
var status503 = testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable}

func TestS16_CallerKeyKeptOnEveryAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  func(r *http.Request, key string) *http.Request
	}{
		{"canonical header", func(r *http.Request, key string) *http.Request {
			r.Header.Set("Idempotency-Key", key)
			return r
		}},
		{"lower-case header map key", func(r *http.Request, key string) *http.Request {
			r.Header["idempotency-key"] = []string{key}
			return r
		}},
		{"upper-case header map key", func(r *http.Request, key string) *http.Request {
			r.Header["IDEMPOTENCY-KEY"] = []string{key}
			return r
		}},
		{"WithKey", func(r *http.Request, key string) *http.Request {
			return r.WithContext(WithKey(r.Context(), key))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startPayments(t, nil)
			srv.Script(status503, status503, status503)
			wire := newWireLog(t)
			j, _ := testJournal(t)
			tr, clk := transportOn(t, j, Options{MaxAttempts: 3}, wire, time.Time{})

			// No space in the key: the client accepts one inside, but the testserver's
			// middleware (package server) takes only visible ASCII and answers 400.
			key := "caller-key-" + strings.ReplaceAll(tt.name, " ", "-")
			req, body := paymentRequest(t, context.Background(), srv.URL, "order-s16", 700)
			req = tt.set(req, key)
			header := req.Header.Clone()
			_, err := tr.RoundTrip(req)
			perr := pendingErr(t, err)
			require.Equal(t, key, perr.Key)
			require.Equal(t, 3, perr.Attempts)
			require.Equal(t, header, req.Header, "the caller's request is not modified")
			require.EqualValues(t, 1, body.closes.Load())

			// A restart: the resumed attempt carries the caller's key too.
			tr2, _ := transportOn(t, reopen(t, j), Options{}, wire, clk.Now().Add(time.Hour))
			outs := resumeAll(t, tr2)
			require.Len(t, outs, 1)
			require.NoError(t, outs[0].Err)
			require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
			require.Equal(t, key, outs[0].Record.Key)

			require.Len(t, wire.sent(), 4)
			wire.requireOneKey(t, key)
			require.Equal(t, 1, srv.Ledger().Effects["order-s16"])
		})
	}
}

func TestS17_OneKeyAcrossStatusesAndRestart(t *testing.T) {
	t.Parallel()
	status429 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusTooManyRequests}
	status500 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusInternalServerError}
	status502 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusBadGateway}
	want := []byte(paymentBody("order-s17", 1250))

	requireSameBytes := func(t *testing.T, wire *wireLog, key string) {
		t.Helper()
		sent := wire.sent()
		require.Len(t, sent, 3)
		wire.requireOneKey(t, key)
		for i, a := range sent {
			require.Equal(t, string(want), string(a.Body), "attempt %d", i+1)
			require.EqualValues(t, len(want), a.ContentLength, "attempt %d", i+1)
		}
	}

	t.Run("one process", func(t *testing.T) {
		srv := startPayments(t, nil)
		srv.Script(status429, status500)
		wire := newWireLog(t)
		j, _ := testJournal(t)
		tr, clk := transportOn(t, j, Options{}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-s17", 1250)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Len(t, clk.Sleeps(), 2)

		rec := onlyRecordOf(t, j)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, 3, rec.Attempts)
		requireSameBytes(t, wire, rec.Key)
		require.Equal(t, 1, srv.Ledger().Effects["order-s17"])
	})

	t.Run("restart in the middle", func(t *testing.T) {
		srv := startPayments(t, nil)
		srv.Script(status429, status502)
		wire := newWireLog(t)
		j, _ := testJournal(t)
		tr, clk := transportOn(t, j, Options{MaxAttempts: 2}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-s17", 1250)
		_, err := tr.RoundTrip(req)
		perr := pendingErr(t, err)
		require.Equal(t, http.StatusBadGateway, perr.LastStatus)
		require.Equal(t, 0, srv.Ledger().Payments())

		// The process stops here; the next one opens the same file.
		tr2, _ := transportOn(t, reopen(t, j), Options{}, wire, clk.Now().Add(time.Minute))
		outs := resumeAll(t, tr2)
		require.Len(t, outs, 1)
		require.NoError(t, outs[0].Err)
		require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)

		rec := onlyRecordOf(t, tr2.bolt())
		require.Equal(t, perr.Key, rec.Key)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, 3, rec.Attempts, "attempts count across process lifetimes")
		requireSameBytes(t, wire, perr.Key)
		require.Equal(t, 1, srv.Ledger().Effects["order-s17"])
	})
}

// A minted key is a version 4 UUID of the RFC 9562 variant, fresh each time.
func TestNewKeyIsRandomUUIDv4(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool)
	for range 1000 {
		k, err := newKey()
		require.NoError(t, err)
		u, err := uuid.Parse(k)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(4), u.Version(), k)
		require.Equal(t, uuid.RFC4122, u.Variant(), k)
		require.Equal(t, u.String(), k, "canonical form")
		require.False(t, seen[k], "key %s minted twice", k)
		seen[k] = true
	}
}
