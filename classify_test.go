// Tests for classify.go: every row of DefaultClassifier's table, for
// errors as the base transport returns them and wrapped as http.Client and
// callers wrap them.

package idem

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

func TestDefaultClassifierErrors(t *testing.T) {
	t.Parallel()
	refused := realRefusedError(t)
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	timeout := fmt.Errorf("%w after %v: %w", ErrAttemptTimeout, time.Second, errors.New("context canceled"))

	tests := []struct {
		name  string
		err   error
		wrote bool
		want  Class
	}{
		// Nothing reached the server.
		{"dial error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route to host")}, false, ClassRetry},
		{"dial error even if Wrote claims otherwise", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("boom")}, true, ClassRetry},
		{"DNS failure", &net.DNSError{Err: "no such host", Name: "pay.invalid", IsNotFound: true}, false, ClassRetry},
		{"DNS failure inside a dial error", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "pay.invalid"}}, false, ClassRetry},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, false, ClassRetry},
		{"connection refused from a real dial", refused, false, ClassRetry},
		{"reset before writing", reset, false, ClassRetry},
		{"EOF before writing", io.EOF, false, ClassRetry},
		{"attempt timeout before writing", timeout, false, ClassRetry},

		// The server may have acted.
		{"reset after writing", reset, true, ClassRetryIfSafe},
		{"EOF after writing", io.EOF, true, ClassRetryIfSafe},
		{"unexpected EOF after writing", io.ErrUnexpectedEOF, true, ClassRetryIfSafe},
		{"attempt timeout after writing", timeout, true, ClassRetryIfSafe},

		// No retry can help.
		{"certificate verification", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false, ClassPermanent},
		{"certificate verification, any cause", &tls.CertificateVerificationError{Err: errors.New("opaque")}, true, ClassPermanent},
		{"unknown authority", x509.UnknownAuthorityError{}, false, ClassPermanent},
		{"hostname mismatch", x509.HostnameError{Host: "pay.example"}, false, ClassPermanent},
		{"expired certificate", x509.CertificateInvalidError{Reason: x509.Expired}, false, ClassPermanent},
		{"invalid request", fmt.Errorf("%w: unsupported scheme %q", ErrInvalidRequest, "ftp"), false, ClassPermanent},
		{"body too large", ErrBodyTooLarge, false, ClassPermanent},
		{"body too large after writing", ErrBodyTooLarge, true, ClassPermanent},
	}
	for _, tt := range tests {
		wrapped := map[string]error{
			"bare":      tt.err,
			"url.Error": &url.Error{Op: "Post", URL: "https://pay.example/payments", Err: tt.err},
			"%w":        fmt.Errorf("charging order 4827: %w", tt.err),
			"%w in url.Error": &url.Error{Op: "Post", URL: "https://pay.example/payments",
				Err: fmt.Errorf("attempt 2: %w", tt.err)},
		}
		for how, err := range wrapped {
			for _, keyed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/keyed=%v", tt.name, how, keyed), func(t *testing.T) {
					got := DefaultClassifier(Attempt{Request: newClassifyRequest(t), Err: err, Keyed: keyed, Wrote: tt.wrote})
					require.Equal(t, tt.want, got, "%v", err)
				})
			}
		}
	}
}

func TestDefaultClassifierStatuses(t *testing.T) {
	tests := []struct {
		status         int
		keyed, unkeyed Class
	}{
		{408, ClassRetry, ClassRetry},
		{425, ClassRetry, ClassRetry},
		{429, ClassRetry, ClassRetry},
		{500, ClassRetry, ClassRetry},
		{502, ClassRetry, ClassRetry},
		{503, ClassRetry, ClassRetry},
		{504, ClassRetry, ClassRetry},
		// The IETF Idempotency-Key draft's "request in progress".
		{409, ClassRetry, ClassFinal},
		// Invalid codes are processed as 500 (RFC 9110 section 15); net/http
		// parses any three digits ("099" was found by FuzzTransportResponse).
		{99, ClassRetry, ClassRetry},
		{0, ClassRetry, ClassRetry},
		{600, ClassRetry, ClassRetry},
		{999, ClassRetry, ClassRetry},

		{200, ClassFinal, ClassFinal},
		{201, ClassFinal, ClassFinal},
		{204, ClassFinal, ClassFinal},
		{301, ClassFinal, ClassFinal},
		{302, ClassFinal, ClassFinal},
		{304, ClassFinal, ClassFinal},
		{400, ClassFinal, ClassFinal},
		{401, ClassFinal, ClassFinal},
		{404, ClassFinal, ClassFinal},
		{410, ClassFinal, ClassFinal},
		{412, ClassFinal, ClassFinal},
		{422, ClassFinal, ClassFinal},
		{501, ClassFinal, ClassFinal},
		{505, ClassFinal, ClassFinal},
	}
	for _, tt := range tests {
		for _, keyed := range []bool{true, false} {
			want := tt.unkeyed
			if keyed {
				want = tt.keyed
			}
			t.Run(fmt.Sprintf("%d/keyed=%v", tt.status, keyed), func(t *testing.T) {
				req := newClassifyRequest(t)
				resp := &http.Response{StatusCode: tt.status, Header: http.Header{}, Body: http.NoBody, Request: req}
				got := DefaultClassifier(Attempt{Request: req, Response: resp, Keyed: keyed, Wrote: true})
				require.Equal(t, want, got)
			})
		}
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{ClassFinal: "final", ClassRetry: "retry", ClassRetryIfSafe: "retry-if-safe", ClassPermanent: "permanent", Class(42): "unknown"} {
		require.Equal(t, want, c.String())
	}
}

// realRefusedError dials a loopback port nobody listens on, for the error the
// kernel and package net really produce.
func realRefusedError(tb testing.TB) error {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := ln.Addr().String()
	require.NoError(tb, ln.Close())
	conn, err := net.Dial("tcp", addr)
	if conn != nil {
		conn.Close()
	}
	require.Error(tb, err)
	require.ErrorIs(tb, err, syscall.ECONNREFUSED)
	return err
}

func newClassifyRequest(tb testing.TB) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://pay.example/payments", nil)
	require.NoError(tb, err)
	return req
}

// S09: the server commits the payment, then drops the connection before the
// response. With a key the retry gets the stored result; without journaling
// the caller learns the outcome is unknown, and nothing is sent twice.
func TestS09_LostResponse(t *testing.T) {
	t.Run("journaled", func(t *testing.T) {
		srv := startPayments(t, &testserver.Options{RequireKey: true})
		srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
		j, _ := testJournal(t)
		tr, _ := transportOn(t, j, Options{}, nil, time.Time{})

		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-9", 900)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), "the retry must get the stored result")

		l := srv.Ledger()
		require.Equal(t, 2, l.Requests)
		require.Equal(t, 1, l.Replays)
		require.Equal(t, map[string]int{"order-9": 1}, l.Effects)
		require.Equal(t, StateSettled, onlyRecord(t, tr).State)
	})
	t.Run("unjournaled", func(t *testing.T) {
		srv := startPayments(t, nil)
		srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
		tr, _ := transportOn(t, nil, Options{Methods: []string{}}, nil, time.Time{})

		req, body := paymentRequest(t, context.Background(), srv.URL, "order-10", 900)
		resp, err := tr.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrOutcomeUnknown)
		require.Equal(t, int32(1), body.closes.Load())

		l := srv.Ledger()
		require.Equal(t, 1, l.Requests, "an unkeyed POST whose outcome is unknown must not be re-sent")
		require.Equal(t, map[string]int{"order-10": 1}, l.Effects)
	})
}

func TestS13_UntrustedCertificate(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			leakcheck.Check(t)
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
