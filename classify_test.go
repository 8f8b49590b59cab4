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
		{"dial error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route to host")}, false, Retry},
		{"dial error even if Wrote claims otherwise", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("boom")}, true, Retry},
		{"DNS failure", &net.DNSError{Err: "no such host", Name: "pay.invalid", IsNotFound: true}, false, Retry},
		{"DNS failure inside a dial error", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "pay.invalid"}}, false, Retry},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, false, Retry},
		{"connection refused from a real dial", refused, false, Retry},
		{"reset before writing", reset, false, Retry},
		{"EOF before writing", io.EOF, false, Retry},
		{"attempt timeout before writing", timeout, false, Retry},

		// The server may have acted.
		{"reset after writing", reset, true, RetryIfSafe},
		{"EOF after writing", io.EOF, true, RetryIfSafe},
		{"unexpected EOF after writing", io.ErrUnexpectedEOF, true, RetryIfSafe},
		{"attempt timeout after writing", timeout, true, RetryIfSafe},

		// No retry can help.
		{"certificate verification", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false, Permanent},
		{"certificate verification, any cause", &tls.CertificateVerificationError{Err: errors.New("opaque")}, true, Permanent},
		{"unknown authority", x509.UnknownAuthorityError{}, false, Permanent},
		{"hostname mismatch", x509.HostnameError{Host: "pay.example"}, false, Permanent},
		{"expired certificate", x509.CertificateInvalidError{Reason: x509.Expired}, false, Permanent},
		{"invalid request", fmt.Errorf("%w: unsupported scheme %q", ErrInvalidRequest, "ftp"), false, Permanent},
		{"body too large", ErrBodyTooLarge, false, Permanent},
		{"body too large after writing", ErrBodyTooLarge, true, Permanent},
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
		{408, Retry, Retry},
		{425, Retry, Retry},
		{429, Retry, Retry},
		{500, Retry, Retry},
		{502, Retry, Retry},
		{503, Retry, Retry},
		{504, Retry, Retry},
		// The IETF Idempotency-Key draft's "request in progress".
		{409, Retry, Final},
		// Invalid codes are processed as 500 (RFC 9110 section 15); net/http
		// parses any three digits ("099" was found by FuzzTransportResponse).
		{99, Retry, Retry},
		{0, Retry, Retry},
		{600, Retry, Retry},
		{999, Retry, Retry},

		{200, Final, Final},
		{201, Final, Final},
		{204, Final, Final},
		{301, Final, Final},
		{302, Final, Final},
		{304, Final, Final},
		{400, Final, Final},
		{401, Final, Final},
		{404, Final, Final},
		{410, Final, Final},
		{412, Final, Final},
		{422, Final, Final},
		{501, Final, Final},
		{505, Final, Final},
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
	for c, want := range map[Class]string{Final: "final", Retry: "retry", RetryIfSafe: "retry-if-safe", Permanent: "permanent", Class(42): "unknown"} {
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
