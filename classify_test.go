// Tests for classify.go: every row of DefaultClassifier's table, for errors as
// the base transport returns them and wrapped as http.Client and callers wrap
// them; the same table against real loopback servers (TLS alerts, CONNECT
// proxies, raw HTTP/2 frames, any status line), with what the journaled
// operation ends as; S09, S13, S14; CheckProxyConnect.

package idem

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/testserver"
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

// notClassified marks a row whose outcome never reaches the Classifier.
const notClassified Class = -1

// classEnv is what a row's setup gives: the base RoundTripper (nil: idem's
// own), the URL, and optionally the request's context, a method and body
// other than a journaled POST of payload, or options.
type classEnv struct {
	base   http.RoundTripper
	url    string
	ctx    context.Context
	method string
	body   string
	client bool // send through an http.Client, not RoundTrip
	opts   func(*Options)
}

type classRow struct {
	name  string
	setup func(t *testing.T) classEnv
	want  Class // the first attempt's class
	// end is the operation's state: Failed, Pending or Settled; 0 for a
	// request that is not journaled.
	end      State
	attempts int // the record's attempts
	check    func(t *testing.T, err error, first Attempt)
}

// rtFunc is a base RoundTripper made of a function, for the rows whose error
// no loopback server can produce in bounded time.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return f(r)
}

func TestClassificationTable(t *testing.T) {
	t.Parallel()
	var rows []classRow
	rows = append(rows, dialRows()...)
	rows = append(rows, tlsRows()...)
	rows = append(rows, proxyRows()...)
	rows = append(rows, http2Rows()...)
	rows = append(rows, exchangeRows()...)
	rows = append(rows, statusRows()...)
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) { runClassRow(t, row) })
	}
}

func runClassRow(t *testing.T, row classRow) {
	env := row.setup(t)
	var (
		mu       sync.Mutex
		attempts []Attempt
		classes  []Class
	)
	opts := &Options{Base: env.base, MaxAttempts: 2, Classifier: func(a Attempt) Class {
		c := DefaultClassifier(a)
		mu.Lock()
		defer mu.Unlock()
		attempts, classes = append(attempts, a), append(classes, c)
		return c
	}}
	if env.opts != nil {
		env.opts(opts)
	}
	tr, _ := memTransport(t, opts)
	t.Cleanup(tr.CloseIdleConnections)
	method, body := env.method, env.body
	if method == "" {
		method, body = http.MethodPost, payload
	}
	req := newRequest(t, method, env.url, body)
	if env.ctx != nil {
		req = req.WithContext(env.ctx)
	}
	var resp *http.Response
	var err error
	if env.client {
		resp, err = (&http.Client{Transport: tr}).Do(req)
	} else {
		resp, err = tr.RoundTrip(req)
	}
	if resp != nil && err == nil {
		drain(t, resp)
	}

	mu.Lock()
	defer mu.Unlock()
	if row.want == notClassified {
		require.Empty(t, classes, "err: %v", err)
	} else {
		require.NotEmpty(t, classes, "err: %v", err)
		require.Equal(t, row.want.String(), classes[0].String(), "first attempt: %v (err %v)", attempts[0].Err, err)
	}
	switch row.end {
	case 0:
		recs, rerr := listRecords(tr.journal)
		require.NoError(t, rerr)
		require.Empty(t, recs)
	case StateFailed:
		require.ErrorIs(t, err, ErrPermanent)
		require.False(t, errors.As(err, new(*PendingError)), "a failed operation is not pending: %v", err)
	case StatePending:
		pendingErr(t, err)
	case StateSettled:
		require.NoError(t, err)
	}
	if row.end != 0 {
		rec := onlyRecordIn(t, tr.journal)
		require.Equal(t, row.end.String(), rec.State.String(), "err: %v", err)
		if row.attempts > 0 {
			require.Equal(t, row.attempts, rec.Attempts)
		}
	}
	if row.check != nil {
		var first Attempt
		if len(attempts) > 0 {
			first = attempts[0]
		}
		row.check(t, err, first)
	}
}

// ends gives the end state and attempts for a class on a journaled POST
// with MaxAttempts 2, when every attempt gets the same outcome.
func ends(c Class) (State, int) {
	switch c {
	case ClassPermanent:
		return StateFailed, 1
	case ClassRetry, ClassRetryIfSafe:
		return StatePending, 2
	}
	return StateSettled, 1
}

func row(name string, want Class, setup func(t *testing.T) classEnv) classRow {
	end, n := ends(want)
	return classRow{name: name, setup: setup, want: want, end: end, attempts: n}
}

func (r classRow) with(check func(t *testing.T, err error, first Attempt)) classRow {
	r.check = check
	return r
}

// wrote checks the first attempt's Wrote.
func wrote(want bool) func(t *testing.T, err error, first Attempt) {
	return func(t *testing.T, _ error, first Attempt) {
		require.Equal(t, want, first.Wrote, "Wrote")
	}
}

// offer makes base present cert whatever CA names the server's
// CertificateRequest gives.
func offer(base *http.Transport, cert tls.Certificate) {
	base.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
}

// alert checks that the first attempt's error carries the TLS alert code.
func alert(code tls.AlertError) func(t *testing.T, err error, first Attempt) {
	return func(t *testing.T, _ error, first Attempt) {
		a, ok := tlsAlert(first.Err)
		require.True(t, ok, "%v", first.Err)
		require.Equal(t, code, a)
	}
}

// alertAfterWrite is alert, and the request was written before the alert
// was read.
func alertAfterWrite(code tls.AlertError) func(t *testing.T, err error, first Attempt) {
	return func(t *testing.T, err error, first Attempt) {
		alert(code)(t, err, first)
		require.True(t, first.Wrote, "the request was written before the alert was read")
	}
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func dialRows() []classRow {
	return []classRow{
		row("dial/connection refused", ClassRetry, func(t *testing.T) classEnv {
			return classEnv{base: &http.Transport{}, url: "http://" + closedPort(t) + "/payments"}
		}),
		row("dial/DNS NXDOMAIN", ClassRetry, func(t *testing.T) classEnv {
			d := &net.Dialer{Resolver: nxdomainResolver(t)}
			return classEnv{base: &http.Transport{DialContext: d.DialContext}, url: "http://pay.idem-test.example/payments"}
		}).with(func(t *testing.T, err error, first Attempt) {
			var dnsErr *net.DNSError
			require.ErrorAs(t, first.Err, &dnsErr)
			require.True(t, dnsErr.IsNotFound)
		}),
		row("dial/timeout", ClassRetry, func(t *testing.T) classEnv {
			d := &net.Dialer{Timeout: time.Nanosecond}
			return classEnv{base: &http.Transport{DialContext: d.DialContext}, url: "http://" + closedPort(t) + "/payments"}
		}).with(func(t *testing.T, err error, first Attempt) {
			var ne net.Error
			require.ErrorAs(t, first.Err, &ne)
			require.True(t, ne.Timeout())
		}),
	}
}

func tlsRows() []classRow {
	created := func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) }
	// clientAuth starts a TLS server that requires a client certificate from
	// ca, at most TLS version maxVersion, HTTP/2 if h2.
	clientAuth := func(t *testing.T, ca *testCA, maxVersion uint16, h2 bool) string {
		cfg := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(time.Hour))},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool, MaxVersion: maxVersion}
		return tlsServer(t, cfg, h2, created).URL
	}
	// gated is a client through a requestGate, offering no certificate or
	// one from another CA, and the server serve starts, which refuses it
	// once the gate is open.
	gated := func(otherCA bool, serve func(t *testing.T, ca *testCA, gate *requestGate) string) func(t *testing.T) classEnv {
		return func(t *testing.T) classEnv {
			ca, gate := newTestCA(t, "idem CA"), newRequestGate()
			base := tlsBase(t, ca.pool)
			base.DialContext = gate.dial
			if otherCA {
				offer(base, newTestCA(t, "other CA").issue(t, true, time.Now().Add(time.Hour)))
			}
			return classEnv{base: base, url: serve(t, ca, gate), ctx: gate.context()}
		}
	}
	// native refuses with crypto/tls's own alerts.
	native := func(t *testing.T, ca *testCA, gate *requestGate) string {
		return gatedNativeClientAuth(t, ca, gate, created)
	}
	var rows []classRow
	for _, h2 := range []bool{false, true} {
		proto := "HTTP/1.1"
		if h2 {
			proto = "HTTP/2"
		}
		// verifying refuses in VerifyConnection.
		verifying := func(t *testing.T, ca *testCA, gate *requestGate) string {
			return gatedClientAuth(t, ca, h2, gate, created)
		}
		rows = append(rows,
			// TLS 1.3: the client's handshake completes before the server
			// checks the certificate; the refusal arrives as an alert on the
			// first read, after the request was written. No handler ran. The
			// server refuses only once the request's headers are on the wire
			// (requestGate), the order a real network gives.
			row("TLS 1.3 alert after the request/no client certificate/"+proto, ClassPermanent, gated(false, verifying)).
				with(alertAfterWrite(42)), // bad_certificate, from VerifyConnection
			row("TLS 1.3 alert after the request/client certificate from another CA/"+proto, ClassPermanent, gated(true, verifying)).
				with(alertAfterWrite(42)),
			row("TLS 1.3 client certificate accepted/"+proto, ClassFinal, func(t *testing.T) classEnv {
				ca := newTestCA(t, "idem CA")
				return classEnv{base: tlsBase(t, ca.pool, ca.issue(t, true, time.Now().Add(time.Hour))),
					url: clientAuth(t, ca, tls.VersionTLS13, h2)}
			}),
		)
	}
	return append(rows,
		// crypto/tls's own refusals, certificate_required and unknown_ca,
		// gated like the rows above: ungated, the server's close can beat
		// the request's write on a loaded machine, and the first attempt
		// then sees "use of closed network connection" instead of the
		// alert. HTTP/1.1 only: over HTTP/2 an alert read before the first
		// stream opens reaches idem as net/http's untyped "client conn
		// could not be established" (the known limit in docs/real-world.md).
		row("TLS 1.3 alert after handshake/no client certificate/HTTP/1.1", ClassPermanent, gated(false, native)).
			with(alertAfterWrite(116)), // certificate_required
		row("TLS 1.3 alert after handshake/client certificate from another CA/HTTP/1.1", ClassPermanent, gated(true, native)).
			with(alertAfterWrite(48)), // unknown_ca
		row("TLS 1.2 alert in the handshake/no client certificate", ClassPermanent, func(t *testing.T) classEnv {
			ca := newTestCA(t, "idem CA")
			return classEnv{base: tlsBase(t, ca.pool), url: clientAuth(t, ca, tls.VersionTLS12, false)}
		}).with(wrote(false)),
		row("TLS handshake/unknown authority", ClassPermanent, func(t *testing.T) classEnv {
			srv := tlsServer(t, nil, false, created)
			return classEnv{base: tlsBase(t, nil), url: srv.URL}
		}).with(func(t *testing.T, err error, first Attempt) {
			require.ErrorAs(t, err, new(x509.UnknownAuthorityError))
		}),
		row("TLS handshake/hostname mismatch", ClassPermanent, func(t *testing.T) classEnv {
			ca := newTestCA(t, "idem CA")
			srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(time.Hour))}}, false, created)
			base := tlsBase(t, ca.pool)
			base.TLSClientConfig.ServerName = "pay.example"
			return classEnv{base: base, url: srv.URL}
		}),
		row("TLS handshake/expired certificate", ClassPermanent, func(t *testing.T) classEnv {
			ca := newTestCA(t, "idem CA")
			srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(-time.Hour))}}, false, created)
			return classEnv{base: tlsBase(t, ca.pool), url: srv.URL}
		}),
		row("TLS handshake/record header error (TLS to a plain HTTP server)", ClassPermanent, func(t *testing.T) classEnv {
			srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
			return classEnv{base: tlsBase(t, nil), url: strings.Replace(srv.URL, "http://", "https://", 1)}
		}).with(func(t *testing.T, err error, first Attempt) {
			require.ErrorAs(t, err, new(tls.RecordHeaderError))
		}),
	)
}

func proxyRows() []classRow {
	// viaProxy is a TLS target behind a CONNECT proxy answering status;
	// hooked installs CheckProxyConnect.
	viaProxy := func(status int, hooked bool) func(t *testing.T) classEnv {
		return func(t *testing.T) classEnv {
			ca := newTestCA(t, "idem CA")
			srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(time.Hour))}}, false,
				func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
			base := tlsBase(t, ca.pool)
			base.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: connectProxy(t, status), User: url.UserPassword("u", "secret")})
			if hooked {
				CheckProxyConnect(base)
			}
			return classEnv{base: base, url: srv.URL}
		}
	}
	proxyStatus := func(want int) func(t *testing.T, err error, first Attempt) {
		return func(t *testing.T, err error, _ Attempt) {
			var perr *ProxyConnectError
			require.ErrorAs(t, err, &perr)
			require.Equal(t, want, perr.StatusCode)
			require.NotContains(t, perr.Error(), "secret")
		}
	}
	return []classRow{
		row("proxy/CONNECT 407", ClassPermanent, viaProxy(http.StatusProxyAuthRequired, true)).with(proxyStatus(407)),
		row("proxy/CONNECT 403", ClassPermanent, viaProxy(http.StatusForbidden, true)).with(proxyStatus(403)),
		row("proxy/CONNECT 502", ClassRetry, viaProxy(http.StatusBadGateway, true)).with(proxyStatus(502)),
		row("proxy/CONNECT 503", ClassRetry, viaProxy(http.StatusServiceUnavailable, true)).with(proxyStatus(503)),
		// A caller's *http.Transport without CheckProxyConnect: idem sends
		// through a clone of it with the hook (transport.go).
		row("proxy/CONNECT 407 on the caller's Transport without CheckProxyConnect", ClassPermanent,
			viaProxy(http.StatusProxyAuthRequired, false)).with(proxyStatus(407)),
		// Known limit: behind a RoundTripper that wraps the Transport, idem
		// cannot install the hook, and net/http gives an error made of the
		// reason phrase alone; nothing was sent, so it is retried.
		row("proxy/CONNECT 407 behind a wrapper without CheckProxyConnect", ClassRetry, func(t *testing.T) classEnv {
			env := viaProxy(http.StatusProxyAuthRequired, false)(t)
			env.base = roundTripFunc(env.base.RoundTrip)
			return env
		}),
		row("proxy/CONNECT 200", ClassFinal, viaProxy(http.StatusOK, true)),
		row("proxy/dial refused", ClassRetry, func(t *testing.T) classEnv {
			base := CheckProxyConnect(&http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: closedPort(t)})})
			return classEnv{base: base, url: "https://127.0.0.1:1/payments"}
		}).with(wrote(false)),
		// For http:// the proxy's answer is the response itself.
		row("proxy/plain HTTP answered 407", ClassFinal, func(t *testing.T) classEnv {
			base := CheckProxyConnect(&http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: connectProxy(t, 407)})})
			return classEnv{base: base, url: "http://127.0.0.1:1/payments"}
		}),
	}
}

func http2Rows() []classRow {
	var refusedStreams atomic.Int64
	return []classRow{
		// net/http retries a refused stream itself, on the same connection,
		// and idem sees one attempt.
		row("HTTP/2/RST_STREAM REFUSED_STREAM once (net/http retries it)", ClassFinal, func(t *testing.T) classEnv {
			url := h2cServer(t, func(h *h2Conn, stream uint32) bool {
				if stream == 1 {
					refusedStreams.Add(1)
					return h.reset(stream, h2RefusedStream) == nil
				}
				return h.reply201(stream) == nil
			})
			return classEnv{base: h2cBase(t), url: url}
		}).with(func(t *testing.T, err error, first Attempt) {
			require.Equal(t, int64(1), refusedStreams.Load())
		}),
		// After its own 7 tries (about a minute of net/http's backoff) the
		// StreamError reaches idem; the mirror type stands in for it here.
		row("HTTP/2/RST_STREAM REFUSED_STREAM after net/http's retries", ClassRetry, func(t *testing.T) classEnv {
			return classEnv{base: rtFunc(func(*http.Request) (*http.Response, error) {
				return nil, h2StreamError{StreamID: 13, Code: h2RefusedStream}
			}), url: "http://127.0.0.1:1/payments"}
		}),
		row("HTTP/2/RST_STREAM INTERNAL_ERROR", ClassRetryIfSafe, func(t *testing.T) classEnv {
			url := h2cServer(t, func(h *h2Conn, stream uint32) bool { return h.reset(stream, 0x2) == nil })
			return classEnv{base: h2cBase(t), url: url}
		}).with(func(t *testing.T, err error, first Attempt) {
			var se h2StreamError
			require.ErrorAs(t, first.Err, &se, "net/http's StreamError fills the mirror")
			require.Equal(t, uint32(0x2), se.Code)
		}),
		// Known limit: net/http's GoAwayError is unexported and has no As
		// method; the stream may have been processed (its ID is not above
		// last-stream-id), so it is "may have acted" either way.
		row("HTTP/2/GOAWAY covering the stream, then close", ClassRetryIfSafe, func(t *testing.T) classEnv {
			url := h2cServer(t, func(h *h2Conn, stream uint32) bool {
				h.goAway(stream, 0x2)
				return false
			})
			return classEnv{base: h2cBase(t), url: url}
		}),
		// A GOAWAY whose last-stream-id is below the stream: not processed;
		// net/http retries it on a new connection itself.
		row("HTTP/2/GOAWAY last-stream-id 0 (net/http retries it)", ClassFinal, func(t *testing.T) classEnv {
			url := h2cServer(t, func(h *h2Conn, stream uint32) bool {
				if h.n == 1 {
					h.goAway(0, 0)
					return false
				}
				return h.reply201(stream) == nil
			})
			return classEnv{base: h2cBase(t), url: url}
		}),
	}
}

func exchangeRows() []classRow {
	hijack := func(readBody bool) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			if readBody {
				drainBody(r)
			}
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // a reset, not a FIN
			}
			c.Close()
		}
	}
	// blocked reads the request, so the server notices the client's close,
	// and never answers.
	blocked := func(w http.ResponseWriter, r *http.Request) { drainBody(r); <-r.Context().Done() }
	plain := func(t *testing.T, h http.HandlerFunc) string {
		return newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, r *http.Request) { h(w, r) }).URL
	}
	return []classRow{
		row("exchange/body write error (reset while the body is sent)", ClassRetryIfSafe, func(t *testing.T) classEnv {
			srv := httptestServer(t, hijack(false))
			return classEnv{base: &http.Transport{}, url: srv, method: http.MethodPost, body: strings.Repeat("x", 4<<20)}
		}).with(wrote(true)),
		row("exchange/reset after the request was read", ClassRetryIfSafe, func(t *testing.T) classEnv {
			return classEnv{base: &http.Transport{}, url: httptestServer(t, hijack(true))}
		}).with(wrote(true)),
		row("exchange/response header timeout", ClassRetryIfSafe, func(t *testing.T) classEnv {
			return classEnv{base: &http.Transport{ResponseHeaderTimeout: 20 * time.Millisecond}, url: httptestServer(t, blocked)}
		}),
		row("exchange/attempt timeout (Options.AttemptTimeout)", ClassRetryIfSafe, func(t *testing.T) classEnv {
			// 500 ms, not less: the timeout must find the request written
			// (a timeout before that is a ClassRetry), however loaded the
			// machine. A response header timeout starts after the write.
			return classEnv{base: &http.Transport{}, url: httptestServer(t, blocked),
				opts: func(o *Options) { o.AttemptTimeout = 500 * time.Millisecond }}
		}).with(func(t *testing.T, err error, first Attempt) {
			require.ErrorIs(t, first.Err, ErrAttemptTimeout)
		}),
		row("exchange/malformed status line", ClassRetryIfSafe, func(t *testing.T) classEnv {
			return classEnv{base: &http.Transport{}, url: statusServer(t, "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n")}
		}),
		// The caller's context ending is handled before the Classifier.
		{name: "exchange/caller's context canceled after writing", want: notClassified, end: StatePending, attempts: 1,
			setup: func(t *testing.T) classEnv {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				url := httptestServer(t, func(w http.ResponseWriter, r *http.Request) { drainBody(r); cancel(); <-r.Context().Done() })
				return classEnv{base: &http.Transport{}, url: url, ctx: ctx}
			},
			check: func(t *testing.T, err error, _ Attempt) { require.ErrorIs(t, err, context.Canceled) }},
		// The redirect limit is http.Client's: the Transport only ever sees
		// one 302 at a time, each final.
		{name: "exchange/redirect limit (http.Client)", want: ClassFinal,
			setup: func(t *testing.T) classEnv {
				url := plain(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/again", http.StatusFound) })
				return classEnv{base: &http.Transport{}, url: url, method: http.MethodGet, client: true}
			},
			check: func(t *testing.T, err error, _ Attempt) {
				var uerr *url.Error
				require.ErrorAs(t, err, &uerr, "http.Client's own error, after the Transport")
			}},
	}
}

// httptestServer starts a plain HTTP/1.1 httptest server with h.
func httptestServer(t *testing.T, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func drainBody(r *http.Request) {
	buf := make([]byte, 32<<10)
	for {
		if _, err := r.Body.Read(buf); err != nil {
			return
		}
	}
}

func statusRows() []classRow {
	// The status line each code is sent with; the Transport sees only the
	// final response after any 1xx.
	retry := map[int]bool{408: true, 425: true, 429: true, 500: true, 502: true, 503: true, 504: true,
		0: true, 99: true, 600: true, 999: true}
	codes := []int{0, 99, 101, 200, 201, 202, 204, 206, 300, 301, 302, 303, 304, 307, 308,
		400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 415, 418, 421, 422, 425, 428, 429, 431, 451,
		500, 501, 502, 503, 504, 505, 507, 511, 600, 999}
	var rows []classRow
	for _, code := range codes {
		want := ClassFinal
		if retry[code] {
			want = ClassRetry
		}
		r := row(fmt.Sprintf("status/%03d", code), want, func(t *testing.T) classEnv {
			return classEnv{base: &http.Transport{}, url: statusServer(t, fmt.Sprintf("HTTP/1.1 %03d X\r\nContent-Length: 0\r\n\r\n", code))}
		})
		switch code {
		case 409:
			// Keyed: the IETF Idempotency-Key draft's "request in progress".
			r.want, r.end, r.attempts = ClassRetry, StatePending, 2
		case 421:
			// Retried once on a new connection, then final.
			r.want, r.end, r.attempts = ClassRetry, StateSettled, 2
		}
		rows = append(rows, r)
	}
	for _, interim := range []int{100, 102, 103} {
		rows = append(rows, row(fmt.Sprintf("status/%d then 201", interim), ClassFinal, func(t *testing.T) classEnv {
			return classEnv{base: &http.Transport{}, url: statusServer(t, fmt.Sprintf("HTTP/1.1 %d X\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", interim))}
		}).with(func(t *testing.T, err error, first Attempt) {
			require.Equal(t, http.StatusCreated, first.Response.StatusCode)
		}))
	}
	return rows
}

// requestGate opens once a request's headers are on the wire: at the first
// write to the connection that completes after httptrace's WroteHeaders
// (net/http reports WroteHeaders with the headers still in its buffer, then
// flushes them, over HTTP/1.1 and HTTP/2 alike). A server that waits for it
// refuses the client's certificate only after the request was written, as on
// a real network, where the request leaves a round trip before the server's
// alert can arrive.
type requestGate struct {
	headers atomic.Bool
	once    sync.Once
	sent    chan struct{}
}

func newRequestGate() *requestGate { return &requestGate{sent: make(chan struct{})} }

func (g *requestGate) open() { g.once.Do(func() { close(g.sent) }) }

// wait returns once the gate is open, or after 5 s.
func (g *requestGate) wait() {
	bound := time.NewTimer(5 * time.Second)
	defer bound.Stop()
	select {
	case <-g.sent:
	case <-bound.C:
	}
}

// context returns a context whose ClientTrace marks WroteHeaders; idem's
// attempt adds its own trace, which calls this one too (httptrace composes).
func (g *requestGate) context() context.Context {
	return httptrace.WithClientTrace(context.Background(),
		&httptrace.ClientTrace{WroteHeaders: func() { g.headers.Store(true) }})
}

// dial is an http.Transport DialContext whose connections open the gate.
func (g *requestGate) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gateConn{Conn: c, g: g}, nil
}

type gateConn struct {
	net.Conn
	g *requestGate
}

func (c *gateConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err == nil && c.g.headers.Load() {
		c.g.open()
	}
	return n, err
}

// gatedClientAuth starts a TLS 1.3 server, HTTP/2 if h2, that asks for a
// client certificate and refuses one missing or not issued by ca, but only
// once gate is open (or after 5 s): it refuses in VerifyConnection, so
// crypto/tls sends bad_certificate (42), whatever the reason.
func gatedClientAuth(tb testing.TB, ca *testCA, h2 bool, gate *requestGate, h http.HandlerFunc) string {
	tb.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.issue(tb, false, time.Now().Add(time.Hour))},
		ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS13,
		VerifyConnection: func(cs tls.ConnectionState) error {
			gate.wait()
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no client certificate")
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: ca.pool,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			return err
		}}
	srv := tlsServer(tb, cfg, h2, h)
	tb.Cleanup(gate.open) // runs before srv.Close
	return srv.URL
}

// gatedNativeClientAuth starts a TLS 1.3 HTTP/1.1 server that requires a
// client certificate issued by ca and refuses others with crypto/tls's own
// alerts (certificate_required, unknown_ca). Its connections hold their
// reads after the server's first flight until gate is open (or 5 s), so the
// client's certificate is judged only after the request was written.
func gatedNativeClientAuth(tb testing.TB, ca *testCA, gate *requestGate, h http.HandlerFunc) string {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = gatedListener{Listener: srv.Listener, g: gate}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.issue(tb, false, time.Now().Add(time.Hour))},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool, MinVersion: tls.VersionTLS13}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the expected handshake failures
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	tb.Cleanup(gate.open) // runs before srv.Close
	return srv.URL
}

// gatedListener's connections wait for their gate before any read that
// follows a write.
type gatedListener struct {
	net.Listener
	g *requestGate
}

func (l gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &heldConn{Conn: c, g: l.g}, nil
}

type heldConn struct {
	net.Conn
	g     *requestGate
	wrote atomic.Bool
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.wrote.Store(true)
	return c.Conn.Write(p)
}

func (c *heldConn) Read(p []byte) (int, error) {
	if c.wrote.Load() {
		c.g.wait()
	}
	return c.Conn.Read(p)
}

// statusServer answers every request with the raw status line
// "HTTP/1.1 <line>", then the given header lines and an empty body. Each
// line may be several responses ("100 Continue\r\n\r\nHTTP/1.1 201 ...").
func statusServer(tb testing.TB, raw string) string {
	tb.Helper()
	return "http://" + serveConns(tb, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(c, raw); err != nil {
				return
			}
		}
	})
}

// nxdomainResolver is a resolver whose only DNS server, on 127.0.0.1,
// answers every query NXDOMAIN.
func nxdomainResolver(tb testing.TB) *net.Resolver {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(tb, err)
	tb.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			resp := append([]byte(nil), buf[:n]...)
			resp[2] = 0x81 | buf[2]&0x01 // QR, opcode 0, RD copied
			resp[3] = 0x83               // RA, RCODE 3 (NXDOMAIN)
			pc.WriteTo(resp, from)
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

// HTTP/2 frame types and flags (RFC 9113 section 6).
const (
	h2FrameHeaders   = 0x1
	h2FrameRSTStream = 0x3
	h2FrameSettings  = 0x4
	h2FrameGoAway    = 0x7
	h2FlagAck        = 0x1
	h2FlagEndStream  = 0x1
	h2FlagEndHeaders = 0x4
)

// h2Conn is the server side of a raw HTTP/2 connection.
type h2Conn struct {
	c  net.Conn
	br *bufio.Reader
	n  int // the connection's number, from 1
}

func (h *h2Conn) write(typ, flags byte, stream uint32, payload []byte) error {
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	_, err := h.c.Write(append(hdr, payload...))
	return err
}

// reply201 answers the stream 201 Created with no body: a literal ":status"
// (static table index 8) without indexing (RFC 7541 section 6.2.2).
func (h *h2Conn) reply201(stream uint32) error {
	return h.write(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, stream, []byte{0x08, 0x03, '2', '0', '1'})
}

func (h *h2Conn) reset(stream, code uint32) error {
	return h.write(h2FrameRSTStream, 0, stream, binary.BigEndian.AppendUint32(nil, code))
}

func (h *h2Conn) goAway(lastStream, code uint32) error {
	p := binary.BigEndian.AppendUint32(nil, lastStream)
	return h.write(h2FrameGoAway, 0, 0, binary.BigEndian.AppendUint32(p, code))
}

// h2cServer is an HTTP/2 server with prior knowledge (no TLS) that calls
// onRequest for each request's HEADERS frame; onRequest returns false to
// close the connection.
func h2cServer(tb testing.TB, onRequest func(h *h2Conn, stream uint32) bool) string {
	tb.Helper()
	return "http://" + serveConns(tb, func(n int, c net.Conn) {
		h := &h2Conn{c: c, br: bufio.NewReader(c), n: n}
		preface := make([]byte, 24)
		if _, err := io.ReadFull(h.br, preface); err != nil {
			return
		}
		if h.write(h2FrameSettings, 0, 0, nil) != nil {
			return
		}
		hdr := make([]byte, 9)
		for {
			if _, err := io.ReadFull(h.br, hdr); err != nil {
				return
			}
			length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
			if _, err := io.CopyN(io.Discard, h.br, int64(length)); err != nil {
				return
			}
			typ, flags, stream := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&0x7fffffff
			switch {
			case typ == h2FrameSettings && flags&h2FlagAck == 0:
				if h.write(h2FrameSettings, h2FlagAck, 0, nil) != nil {
					return
				}
			case typ == h2FrameHeaders:
				if !onRequest(h, stream) {
					return
				}
			}
		}
	})
}

// h2cBase is an *http.Transport that speaks HTTP/2 with prior knowledge to
// http:// URLs.
func h2cBase(tb testing.TB) *http.Transport {
	tb.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	base := &http.Transport{Protocols: &p}
	tb.Cleanup(base.CloseIdleConnections)
	return base
}

func BenchmarkClassify(b *testing.B) {
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable}
	err := fmt.Errorf("wrapped: %w", errors.New("connection reset"))
	b.ReportAllocs()
	for b.Loop() {
		DefaultClassifier(Attempt{Response: resp, Keyed: true})
		DefaultClassifier(Attempt{Err: err, Wrote: true, Keyed: true})
	}
}
