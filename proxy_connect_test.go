// Tests for proxy_connect.go and base.go: the base idem builds for a nil
// Options.Base types a refused CONNECT, a caller's Base is never modified,
// and CheckProxyConnect keeps a hook already installed.

package idem

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
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

func TestCallerBaseNotModified(t *testing.T) {
	base := &http.Transport{}
	tr, _ := memTransport(t, &Options{Base: base})
	require.Same(t, base, tr.base())
	require.Nil(t, base.OnProxyConnectResponse)
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
