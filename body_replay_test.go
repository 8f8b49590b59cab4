// Tests for replaying the journaled body (body.go): every attempt carries the
// byte-identical body with a matching Content-Length, a reused *http.Request
// still sends its body, and no cap truncates it. Field scenarios S06 and S07
// (SCENARIOS.md, "Bodies and connections").

package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestS06_RetryCarriesIdenticalBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		newReq func(t *testing.T, url string) (*http.Request, *countingBody)
	}{
		{"POST from http.NewRequest", http.MethodPost, func(t *testing.T, url string) (*http.Request, *countingBody) {
			return newRequest(t, http.MethodPost, url, payload), nil
		}},
		{"POST with a bare body of unknown length", http.MethodPost, func(t *testing.T, url string) (*http.Request, *countingBody) {
			body := &countingBody{Reader: strings.NewReader(payload)}
			req, err := http.NewRequest(http.MethodPost, url, body)
			require.NoError(t, err)
			require.Nil(t, req.GetBody)
			require.Zero(t, req.ContentLength)
			return req, body
		}},
		{"unjournaled PUT", http.MethodPut, func(t *testing.T, url string) (*http.Request, *countingBody) {
			body := &countingBody{Reader: strings.NewReader(payload)}
			req, err := http.NewRequest(http.MethodPut, url, body)
			require.NoError(t, err)
			req.ContentLength = int64(len(payload))
			return req, body
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					reply(w, http.StatusInternalServerError)
					return
				}
				reply(w, http.StatusCreated)
			})
			req, counted := tt.newReq(t, srv.URL)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)

			reqs := srv.requests()
			require.Len(t, reqs, 2)
			require.Len(t, clk.Sleeps(), 1)
			for i, r := range reqs {
				require.Equal(t, tt.method, r.Method)
				sameBytes(t, []byte(payload), r.Body, "attempt %d body", i+1)
				require.Equal(t, int64(len(payload)), r.ContentLength, "attempt %d Content-Length", i+1)
			}
			if tt.method == http.MethodPost {
				sameKey(t, reqs)
			}
			if counted != nil {
				require.Equal(t, int32(1), counted.closes.Load(), "the caller's body is closed exactly once")
			}
		})
	}
}

func TestS07_ReusedRequest(t *testing.T) {
	t.Parallel()
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			// Each call meets 503 once, so each call makes two attempts.
			tr, _, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
				if n%2 == 1 {
					reply(w, http.StatusServiceUnavailable)
					return
				}
				reply(w, http.StatusCreated)
			})
			client := &http.Client{Transport: tr}
			req := newRequest(t, method, srv.URL, payload)
			require.NotNil(t, req.GetBody)

			const calls = 3
			for i := 1; i <= calls; i++ {
				resp, err := client.Do(req)
				require.NoError(t, err, "call %d", i)
				require.Equal(t, http.StatusCreated, resp.StatusCode, "call %d", i)
				drain(t, resp)
			}

			reqs := srv.requests()
			require.Len(t, reqs, 2*calls)
			for i, r := range reqs {
				sameBytes(t, []byte(payload), r.Body, "call %d attempt %d body", i/2+1, i%2+1)
				require.Equal(t, int64(len(payload)), r.ContentLength, "call %d attempt %d", i/2+1, i%2+1)
			}
		})
	}

	// A reused request with no way to rebuild its body must not be sent with a
	// silently shortened one.
	t.Run("spent body without GetBody", func(t *testing.T) {
		tr, _, srv := newScenario(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusCreated)
		})
		req := newRequest(t, http.MethodPost, srv.URL, payload)
		req.GetBody = nil
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(t, resp)

		resp, err = tr.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrInvalidRequest)
		require.Equal(t, 1, srv.count(), "nothing sent for the second call")
	})
}

func TestMaxBodyBytesMaxInt64SendsWholeBody(t *testing.T) {
	t.Parallel()
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

// An attempt's body is one net/http knows to be in memory, as a caller's
// bytes.Reader is: the request leaves in as many writes as plain net/http
// makes for it (one), not with its headers flushed first.
func TestAttemptWritesLikePlainNetHTTP(t *testing.T) {
	t.Parallel()
	srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
	body := strings.Repeat("x", 1024)
	writes := func(send func(base http.RoundTripper, req *http.Request) (*http.Response, error)) int64 {
		var n atomic.Int64
		base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &writeCounter{Conn: c, n: &n}, nil
		}}
		defer base.CloseIdleConnections()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := send(base, req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return n.Load()
	}
	plain := writes(func(base http.RoundTripper, req *http.Request) (*http.Response, error) { return base.RoundTrip(req) })
	journaled := writes(func(base http.RoundTripper, req *http.Request) (*http.Response, error) {
		tr, _ := memTransport(t, &Options{Base: base})
		return tr.RoundTrip(req)
	})
	require.Equal(t, int64(1), plain, "plain net/http writes this request at once")
	require.Equal(t, plain, journaled, "idem's attempt takes as many writes as plain net/http")
}

// writeCounter counts the writes to a connection.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}
