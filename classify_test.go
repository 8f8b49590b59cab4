// Tests for classify.go: every row of DefaultClassifier's table, for
// errors as the base transport returns them and wrapped as http.Client and
// callers wrap them.

package idem

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultClassifierErrors(t *testing.T) {
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
