// Tests for proxy_connect.go and base.go: the base idem builds for a nil
// Options.Base types a refused CONNECT, and so does the clone it sends
// through for a caller's *http.Transport with a Proxy; a caller's Base is
// never modified, and CheckProxyConnect keeps a hook already installed.

package idem

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultBaseChecksProxyConnect(t *testing.T) {
	ca := newTestCA(t, "idem CA")
	srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(time.Hour))}}, false,
		func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
	tr, clk := memTransport(t, nil)
	t.Cleanup(tr.CloseIdleConnections)
	own, ok := tr.base().(*http.Transport)
	require.True(t, ok, "a clone of http.DefaultTransport")
	require.NotSame(t, http.DefaultTransport, own)
	require.Nil(t, http.DefaultTransport.(*http.Transport).OnProxyConnectResponse, "http.DefaultTransport is left alone")
	// ProxyFromEnvironment reads the environment once per process; point
	// this clone at the proxy directly.
	own.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: connectProxy(t, http.StatusProxyAuthRequired)})
	own.TLSClientConfig = &tls.Config{RootCAs: ca.pool}

	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrPermanent)
	var perr *ProxyConnectError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, http.StatusProxyAuthRequired, perr.StatusCode)
	rec := onlyRecordIn(t, tr.journal)
	require.Equal(t, StateFailed, rec.State)
	require.Equal(t, 1, rec.Attempts)
	require.Empty(t, clk.Sleeps())
}

// TestS43ProxyAuthOnCallerTransport: S43, a corporate proxy (a real
// loopback server) answers 407 to CONNECT, reached through the caller's own
// *http.Transport, which has a Proxy with wrong credentials and no
// OnProxyConnectResponse. One CONNECT, an error at once (the *ProxyConnectError,
// without the credentials), the operation failed after one attempt, and
// nothing left for Resume to send; the caller's Transport is left as it was.
func TestS43ProxyAuthOnCallerTransport(t *testing.T) {
	var connects, served atomic.Int32
	ca := newTestCA(t, "idem CA")
	srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(time.Hour))}}, false,
		func(w http.ResponseWriter, _ *http.Request) { served.Add(1); reply(w, http.StatusCreated) })
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			connects.Add(1)
		}
		w.Header().Set("Proxy-Authenticate", `Basic realm="corp"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
	}))
	t.Cleanup(proxy.Close)
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	proxyURL.User = url.UserPassword("alice", "wrong-secret")
	base := tlsBase(t, ca.pool)
	base.Proxy = http.ProxyURL(proxyURL)

	c, err := Open(filepath.Join(t.TempDir(), "idem.journal"), &Options{Base: base})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	t.Cleanup(c.Transport().CloseIdleConnections)
	req := newRequest(t, http.MethodPost, srv.URL, payload)
	resp, err := c.HTTPClient().Do(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrPermanent)
	require.NotErrorAs(t, err, new(*PendingError))
	var perr *ProxyConnectError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, http.StatusProxyAuthRequired, perr.StatusCode)
	require.NotContains(t, err.Error(), "wrong-secret")
	require.Equal(t, int32(1), connects.Load())
	require.Zero(t, served.Load())

	rec := onlyRecordIn(t, c.Journal())
	require.Equal(t, StateFailed, rec.State)
	require.Equal(t, 1, rec.Attempts)
	n, err := c.Journal().PendingCount(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, resumeAll(t, c.Transport()))
	require.Equal(t, int32(1), connects.Load(), "Resume sends nothing")
	require.Nil(t, base.OnProxyConnectResponse, "the caller's Transport is left alone")
}

// TestCallerBase: a caller's Base is used as it is, unless it is an
// *http.Transport with a Proxy, which is used through a clone with the
// check installed after the caller's own hook; the caller's Transport is
// never modified.
func TestCallerBase(t *testing.T) {
	t.Run("no proxy", func(t *testing.T) {
		base := &http.Transport{}
		tr, _ := memTransport(t, &Options{Base: base})
		require.Same(t, base, tr.base())
		require.Nil(t, base.OnProxyConnectResponse)
	})
	t.Run("not an *http.Transport", func(t *testing.T) {
		inner := &http.Transport{Proxy: http.ProxyFromEnvironment}
		tr, _ := memTransport(t, &Options{Base: roundTripFunc(inner.RoundTrip)})
		_, ok := tr.base().(roundTripFunc)
		require.True(t, ok)
		require.Nil(t, inner.OnProxyConnectResponse)
	})
	t.Run("proxy", func(t *testing.T) {
		var mine int
		hook := func(context.Context, *url.URL, *http.Request, *http.Response) error { mine++; return nil }
		base := &http.Transport{Proxy: http.ProxyFromEnvironment, OnProxyConnectResponse: hook, MaxConnsPerHost: 3}
		tr, _ := memTransport(t, &Options{Base: base})
		clone, ok := tr.base().(*http.Transport)
		require.True(t, ok)
		require.NotSame(t, base, clone)
		require.Equal(t, 3, clone.MaxConnsPerHost, "the caller's settings")

		connect := &http.Request{Method: http.MethodConnect, Host: "pay.example:443"}
		refused := &http.Response{StatusCode: http.StatusProxyAuthRequired}
		proxy := &url.URL{Scheme: "http", Host: "proxy.example:3128"}
		err := clone.OnProxyConnectResponse(context.Background(), proxy, connect, refused)
		var perr *ProxyConnectError
		require.ErrorAs(t, err, &perr)
		require.Equal(t, 1, mine, "the caller's hook runs first")
		// The caller's own Transport keeps its own hook, unchecked.
		require.NoError(t, base.OnProxyConnectResponse(context.Background(), proxy, connect, refused))
		require.Equal(t, 2, mine)
	})
}

func TestCheckProxyConnectKeepsHook(t *testing.T) {
	ca := newTestCA(t, "idem CA")
	srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(time.Hour))}}, false,
		func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
	errMine := errors.New("mine")
	for _, tc := range []struct {
		name   string
		status int
		mine   bool // the earlier hook refuses
	}{
		{"earlier hook's error wins", http.StatusProxyAuthRequired, true},
		{"earlier hook passes, 407 typed", http.StatusProxyAuthRequired, false},
		{"200 passes", http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			base := tlsBase(t, ca.pool)
			base.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: connectProxy(t, tc.status)})
			base.OnProxyConnectResponse = func(context.Context, *url.URL, *http.Request, *http.Response) error {
				calls++
				if tc.mine {
					return errMine
				}
				return nil
			}
			require.Same(t, base, CheckProxyConnect(base))
			req := newRequest(t, http.MethodGet, srv.URL, "")
			resp, err := base.RoundTrip(req)
			require.Equal(t, 1, calls)
			switch {
			case tc.mine:
				require.ErrorIs(t, err, errMine)
				require.False(t, errors.As(err, new(*ProxyConnectError)))
			case tc.status == http.StatusOK:
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, resp.StatusCode)
				drain(t, resp)
			default:
				var perr *ProxyConnectError
				require.ErrorAs(t, err, &perr)
				require.Equal(t, tc.status, perr.StatusCode)
			}
		})
	}
}
