// Scenarios S13-S15 (SCENARIOS.md, "Classification"): an untrusted
// certificate fails permanently after one attempt, 501 is final, and a server
// that always says 503 gets exactly MaxAttempts requests.

package idem

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestS13_UntrustedCertificate(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			checkGoroutines(t)
			var conns, handled atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				handled.Add(1)
				reply(w, http.StatusCreated)
			}))
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the expected handshake failure
			srv.StartTLS()
			t.Cleanup(srv.Close)

			base := &http.Transport{} // trusts only the system roots, not httptest's
			t.Cleanup(base.CloseIdleConnections)
			tr, clk := testTransport(t, &Options{Base: base})

			resp, err := tr.RoundTrip(newRequest(t, method, srv.URL, payload))
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrPermanent)
			var certErr *tls.CertificateVerificationError
			require.True(t, errors.As(err, &certErr), "want a *tls.CertificateVerificationError in %v", err)
			require.False(t, errors.As(err, new(*PendingError)), "a permanent failure is not pending")

			require.Equal(t, int64(1), conns.Load(), "one attempt reached the server")
			require.Zero(t, handled.Load())
			require.Empty(t, clk.Sleeps())
			if method == http.MethodPost {
				rec := onlyRecord(t, tr)
				require.Equal(t, StateFailed, rec.State)
				require.Equal(t, 1, rec.Attempts)
				require.NotEmpty(t, rec.LastError)
			}
		})
	}
}

func TestS14_AlwaysNotImplemented(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			tr, clk, srv := newScenario(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
				reply(w, http.StatusNotImplemented)
			})
			resp, err := tr.RoundTrip(newRequest(t, method, srv.URL, payload))
			require.NoError(t, err)
			require.Equal(t, http.StatusNotImplemented, resp.StatusCode)
			require.Equal(t, http.StatusText(http.StatusNotImplemented), string(drain(t, resp)))
			require.Equal(t, 1, srv.count())
			require.Empty(t, clk.Sleeps())
			if method == http.MethodPost {
				rec := onlyRecord(t, tr)
				require.Equal(t, StateSettled, rec.State)
				require.Equal(t, http.StatusNotImplemented, rec.Status)
				require.Equal(t, 1, rec.Attempts)
			}
		})
	}
}

func TestS15_AlwaysUnavailable(t *testing.T) {
	// 503 and 429 alternate: each counts as an attempt.
	unavailable := func(n int, w http.ResponseWriter, _ *http.Request) {
		if n%2 == 0 {
			reply(w, http.StatusTooManyRequests)
			return
		}
		reply(w, http.StatusServiceUnavailable)
	}
	for _, n := range []int{1, 3, 6} {
		lastStatus := http.StatusServiceUnavailable
		if n%2 == 0 {
			lastStatus = http.StatusTooManyRequests
		}
		t.Run(fmt.Sprintf("POST/MaxAttempts=%d", n), func(t *testing.T) {
			tr, clk, srv := newScenario(t, &Options{MaxAttempts: n}, unavailable)
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
			require.Nil(t, resp)
			perr := pendingErr(t, err)
			require.Equal(t, n, srv.count())
			require.Equal(t, n, perr.Attempts)
			require.Equal(t, lastStatus, perr.LastStatus)
			require.Len(t, clk.Sleeps(), n-1, "no sleep after the last attempt")
			sameKey(t, srv.requests())

			rec := onlyRecord(t, tr)
			require.Equal(t, StatePending, rec.State)
			require.Equal(t, n, rec.Attempts)
		})
		t.Run(fmt.Sprintf("GET/MaxAttempts=%d", n), func(t *testing.T) {
			tr, clk, srv := newScenario(t, &Options{MaxAttempts: n}, unavailable)
			resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
			require.NoError(t, err)
			require.Equal(t, lastStatus, resp.StatusCode)
			require.Equal(t, http.StatusText(lastStatus), string(drain(t, resp)), "the last body is the caller's to read")
			require.Equal(t, n, srv.count())
			require.Len(t, clk.Sleeps(), n-1)
			recs, err := tr.bolt().Records()
			require.NoError(t, err)
			require.Empty(t, recs, "GET is not journaled")
		})
	}
}
