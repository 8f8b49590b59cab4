// Tests for misdirected.go: a 421 Misdirected Request is retried once, on a
// new connection (RFC 9110 section 15.5.20), over HTTP/1.1 and HTTP/2, then
// final.

package idem

import (
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMisdirectedRetriedOnNewConnection(t *testing.T) {
	t.Parallel()
	type wrapped struct{ *http.Transport } // a base idem cannot clone
	for _, tc := range []struct {
		name string
		h2   bool
		wrap bool
	}{
		{"HTTP/1.1", false, false},
		{"HTTP/2", true, false},
		{"HTTP/1.1 through a wrapping base", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns, requests atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if requests.Add(1) == 1 {
					reply(w, http.StatusMisdirectedRequest)
					return
				}
				reply(w, http.StatusCreated)
			}))
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.EnableHTTP2 = tc.h2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			var base http.RoundTripper = tlsBase(t, roots)
			if tc.wrap {
				base = wrapped{base.(*http.Transport)}
			}

			var mu sync.Mutex
			var got []Attempt
			tr, _ := memTransport(t, &Options{Base: base, Classifier: func(a Attempt) Class {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, a)
				return DefaultClassifier(a)
			}})
			var gotConns []httptrace.GotConnInfo
			trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
				mu.Lock()
				defer mu.Unlock()
				gotConns = append(gotConns, i)
			}}
			req := newRequest(t, http.MethodPost, srv.URL, payload)
			req = req.WithContext(httptrace.WithClientTrace(context.Background(), trace))
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)
			if tc.h2 {
				require.Equal(t, 2, resp.ProtoMajor)
			}

			rec := onlyRecordIn(t, tr.journal)
			require.Equal(t, StateSettled, rec.State)
			require.Equal(t, 2, rec.Attempts)
			require.Equal(t, int64(2), requests.Load(), "net/http does not retry a 421 itself; idem retries it once")
			require.Equal(t, int64(2), conns.Load(), "the retry came on a connection of its own")

			mu.Lock()
			defer mu.Unlock()
			require.Len(t, got, 2)
			require.False(t, got[0].Misdirected)
			require.True(t, got[1].Misdirected)
			require.Equal(t, []int{1, 2}, []int{got[0].N, got[1].N})
			require.Len(t, gotConns, 2)
			require.False(t, gotConns[1].Reused, "the second attempt dialed a new connection")
			require.NotSame(t, gotConns[0].Conn, gotConns[1].Conn)
		})
	}
}

func TestMisdirectedTwiceIsFinal(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusMisdirectedRequest)
		}))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		t.Cleanup(srv.Close)
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		tr, clk := memTransport(t, &Options{Base: tlsBase(t, roots)})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
		require.NoError(t, err)
		require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
		require.Equal(t, http.StatusText(http.StatusMisdirectedRequest), string(drain(t, resp)), "the second 421 is the caller's")
		rec := onlyRecordIn(t, tr.journal)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, http.StatusMisdirectedRequest, rec.Status)
		require.Equal(t, 2, rec.Attempts)
		require.Len(t, clk.Sleeps(), 1)
	}
}
