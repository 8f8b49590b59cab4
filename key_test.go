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

	"github.com/stretchr/testify/require"
)

func TestInvalidCallerKeyRefused(t *testing.T) {
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

func TestCallerKeyLimitsAccepted(t *testing.T) {
	for _, key := range []string{
		"k",
		strings.Repeat("k", 255),
		"inner space ok",
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
