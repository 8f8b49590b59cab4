// Loopback servers for the classification table (classify_table_test.go): a
// small PKI for TLS with client certificates, a CONNECT proxy, a server that
// writes any status line, a DNS server that knows no name, and an HTTP/2
// server that speaks raw frames to reset streams and send GOAWAY.

package idem

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(tb testing.TB, name string) *testCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(tb, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(tb, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a leaf certificate for 127.0.0.1 (server) or a client,
// valid until notAfter.
func (ca *testCA) issue(tb testing.TB, client bool, notAfter time.Time) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "idem test"},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(tb, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsServer starts an httptest TLS server on 127.0.0.1 with cfg (its
// certificate, client authentication, versions), HTTP/2 if h2.
func tlsServer(tb testing.TB, cfg *tls.Config, h2 bool, h http.HandlerFunc) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = cfg
	srv.EnableHTTP2 = h2
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the expected handshake failures
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	return srv
}

// tlsBase is an *http.Transport trusting roots, presenting certs, trying
// HTTP/2 when the server offers it.
func tlsBase(tb testing.TB, roots *x509.CertPool, certs ...tls.Certificate) *http.Transport {
	tb.Helper()
	base := &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}
	tb.Cleanup(base.CloseIdleConnections)
	return base
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

// serveConns accepts connections on a fresh 127.0.0.1 listener and runs
// handle on each until the test ends. It returns the listener's address.
func serveConns(tb testing.TB, handle func(n int, c net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(n, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// connectProxy is a forward proxy on 127.0.0.1. A CONNECT is answered with
// status (200 opens the tunnel to the target); any other request is answered
// with status and an empty body.
func connectProxy(tb testing.TB, status int) string {
	tb.Helper()
	return serveConns(tb, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Method != http.MethodConnect || status != http.StatusOK {
			fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nProxy-Authenticate: Basic realm=\"idem\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
				status, http.StatusText(status))
			return
		}
		up, err := net.Dial("tcp", req.Host)
		if err != nil {
			fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
			return
		}
		defer up.Close()
		fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		done := make(chan struct{})
		go func() {
			io.Copy(up, br)
			up.Close()
			close(done)
		}()
		io.Copy(c, up)
		c.Close()
		<-done
	})
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
