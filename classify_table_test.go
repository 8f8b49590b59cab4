// The classification table, against real loopback servers: every kind of
// error net/http and crypto/tls return from RoundTrip, and every status, each
// produced for real where it can be, with the Class DefaultClassifier gives
// the first attempt and what the journaled operation ends as.

package idem

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
		// could not be established" (the known limit in doc.go).
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
		// through a clone of it with the hook (base.go).
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
