// This file holds the classification table: what an attempt's outcome (an
// error or a status) means for the operation; DefaultClassifier's doc is the
// table. Errors are told apart by type: TLS alerts, HTTP/2 stream resets
// (without importing x/net), and a proxy's refusal of a CONNECT tunnel.

package idem

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
)

// Class is what the attempt loop does with one attempt's outcome.
type Class int

const (
	// ClassFinal settles the operation and returns the response to the
	// caller.
	ClassFinal Class = iota
	// ClassRetry means nothing reached the server, or the server asked to
	// try again.
	ClassRetry
	// ClassRetryIfSafe means the server may have acted: retry only a request
	// that carries an idempotency key or has an idempotent method (RFC 9110
	// section 9.2.2); otherwise return ErrOutcomeUnknown.
	ClassRetryIfSafe
	// ClassPermanent means no retry can help; the operation is marked failed.
	ClassPermanent
)

func (c Class) String() string {
	switch c {
	case ClassFinal:
		return "final"
	case ClassRetry:
		return "retry"
	case ClassRetryIfSafe:
		return "retry-if-safe"
	case ClassPermanent:
		return "permanent"
	}
	return "unknown"
}

// Attempt is one attempt's outcome, the input to a Classifier. Exactly one of
// Response and Err is non-nil.
type Attempt struct {
	Request  *http.Request
	Response *http.Response
	Err      error
	// Keyed reports whether the request carries an idempotency key.
	Keyed bool
	// Wrote reports whether the request headers were written to a connection
	// (httptrace WroteHeaders). False means the server cannot have acted.
	Wrote bool
	// N is the attempt's number in this call, from 1.
	N int
	// Misdirected reports whether an earlier attempt of this call was
	// answered 421 Misdirected Request; the attempt right after it went out
	// on a new connection (RFC 9110 section 15.5.20).
	Misdirected bool
}

// A Classifier maps an attempt's outcome to a Class. It must be safe for
// concurrent use and must not read or close the response body. The caller's own
// context ending is handled before the Classifier is asked.
type Classifier func(Attempt) Class

// DefaultClassifier is idem's classification table:
//
//	nothing reached the server (dial, DNS, proxy dial, not written)  ClassRetry
//	the server never processed it (HTTP/2 REFUSED_STREAM)            ClassRetry
//	the server may have acted (reset, EOF, timeout, other HTTP/2
//	stream resets, GOAWAY, malformed response)                       ClassRetryIfSafe
//	408, 425, 429, 500, 502, 503, 504; 409 when keyed                ClassRetry
//	421 the first time in a call (then on a new connection)          ClassRetry
//	a status outside 100..599 (as 500: RFC 9110 section 15)          ClassRetry
//	a *ProxyConnectError with 408, 429, 500, 502, 503 or 504         ClassRetry
//	any other *ProxyConnectError (407, 403, ...)                     ClassPermanent
//	a TLS alert refusing the handshake or the client certificate     ClassPermanent
//	certificate errors, TLS to a non-TLS server (RecordHeaderError),
//	ErrInvalidRequest, ErrBodyTooLarge                               ClassPermanent
//	any other status (2xx, 3xx, other 4xx, a second 421, 501, 505)   ClassFinal
//
// Errors are matched by type (errors.Is, errors.As), never by their text. A
// refused CONNECT is typed only when the base *http.Transport has
// CheckProxyConnect installed (see Options.Base).
func DefaultClassifier(a Attempt) Class {
	if a.Err != nil {
		return classifyError(a.Err, a.Wrote)
	}
	code := a.Response.StatusCode
	if code < 100 || code > 599 {
		// RFC 9110 section 15: a client processes an invalid status code as
		// a 5xx, so as 500.
		return ClassRetry
	}
	switch {
	case retryableStatus(code):
		return ClassRetry
	case code == http.StatusConflict && a.Keyed:
		// The IETF Idempotency-Key draft answers 409 while a request with the
		// same key is still being processed.
		return ClassRetry
	case code == http.StatusMisdirectedRequest && !a.Misdirected:
		// RFC 9110 section 15.5.20: the server did not process the request;
		// the client may retry it, whatever its method, on another
		// connection. Once: a second 421 is final.
		return ClassRetry
	}
	return ClassFinal
}

// retryableStatus reports whether a server's status asks to try again.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func classifyError(err error, wrote bool) Class {
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidCert x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		proxyErr    *ProxyConnectError
		dnsErr      *net.DNSError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalidCert),
		errors.As(err, &recordErr), refusingAlert(err),
		errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrBodyTooLarge):
		return ClassPermanent
	case errors.As(err, &proxyErr):
		if retryableStatus(proxyErr.StatusCode) {
			return ClassRetry
		}
		return ClassPermanent
	case errors.As(err, &dnsErr), hasOp(err, "dial"), hasOp(err, "proxyconnect"):
		return ClassRetry
	case !wrote, refusedStream(err):
		return ClassRetry
	}
	return ClassRetryIfSafe
}

// unprocessed reports whether err proves that no HTTP server saw the attempt,
// even though its headers were written: the server's TLS layer refused the
// connection, the proxy never opened the tunnel, or an HTTP/2 server refused
// the stream before any processing (RFC 9113 section 8.7). The attempt loop
// then does not count the attempt as possibly sent.
func unprocessed(err error) bool {
	if err == nil {
		return false
	}
	return refusingAlert(err) || errors.As(err, new(*ProxyConnectError)) || refusedStream(err)
}

// hasOp reports whether err wraps a *net.OpError for op anywhere in its
// chain; errors.As would stop at the first *net.OpError (net/http wraps a
// proxy's dial error in one of Op "proxyconnect").
func hasOp(err error, op string) bool {
	found := false
	walkErrors(err, func(e error) bool {
		if o, ok := e.(*net.OpError); ok && o.Op == op {
			found = true
		}
		return found
	})
	return found
}

// walkErrors calls f on err and every error it wraps, depth first, until f
// returns true.
func walkErrors(err error, f func(error) bool) bool {
	for depth := 0; err != nil && depth < 100; depth++ {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walkErrors(e, f) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

// refusingAlerts are the TLS alert codes (RFC 8446 section 6.2) that refuse a
// handshake or a certificate, which a server sends before it reads any
// application data: the request was never processed.
var refusingAlerts = map[tls.AlertError]bool{
	40:  true, // handshake_failure
	42:  true, // bad_certificate
	43:  true, // unsupported_certificate
	44:  true, // certificate_revoked
	45:  true, // certificate_expired
	46:  true, // certificate_unknown
	48:  true, // unknown_ca
	49:  true, // access_denied
	51:  true, // decrypt_error (a handshake signature did not verify)
	70:  true, // protocol_version
	71:  true, // insufficient_security
	112: true, // unrecognized_name
	116: true, // certificate_required
	120: true, // no_application_protocol
}

// refusingAlert reports whether err carries a TLS alert, sent by the server,
// that refuses the handshake or the client's certificate.
func refusingAlert(err error) bool {
	a, ok := tlsAlert(err)
	return ok && refusingAlerts[a]
}

// tlsAlert returns the TLS alert that err carries: a tls.AlertError, or else
// crypto/tls's unexported alert type (a uint8 named alert, the code), in
// which a peer's alert arrives and which errors.As cannot reach; it is found
// by reflection, never by the error's text.
func tlsAlert(err error) (tls.AlertError, bool) {
	var a tls.AlertError
	if errors.As(err, &a) {
		return a, true
	}
	found := walkErrors(err, func(e error) bool {
		t := reflect.TypeOf(e)
		if t.Kind() == reflect.Uint8 && t.PkgPath() == "crypto/tls" && t.Name() == "alert" {
			a = tls.AlertError(reflect.ValueOf(e).Uint())
			return true
		}
		return false
	})
	return a, found
}

// h2RefusedStream is HTTP/2's REFUSED_STREAM error code (RFC 9113 section 7).
const h2RefusedStream = 0x7

// h2StreamError mirrors net/http's HTTP/2 StreamError, field for field.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string {
	return fmt.Sprintf("idem: HTTP/2 stream %d reset with code %#x", e.StreamID, e.Code)
}

// refusedStream reports whether err is an HTTP/2 stream reset with
// REFUSED_STREAM: RFC 9113 section 8.7 promises the server did no
// processing.
func refusedStream(err error) bool {
	var se h2StreamError
	return errors.As(err, &se) && se.Code == h2RefusedStream
}

// ProxyConnectError is returned, through a base *http.Transport that has
// CheckProxyConnect installed, when an HTTP proxy answers the CONNECT request
// for an https:// URL (RFC 9110 section 9.3.6) with a status other than 200.
// The tunnel was never opened, so the request never left the client.
// DefaultClassifier retries it when StatusCode is 408, 429, 500, 502, 503 or
// 504 and fails the operation at once otherwise (407 Proxy Authentication
// Required, 403, ...).
type ProxyConnectError struct {
	Proxy      string // the proxy's URL, without its userinfo
	Target     string // the host:port the tunnel was asked for
	StatusCode int    // the proxy's status code
}

func (e *ProxyConnectError) Error() string {
	return fmt.Sprintf("idem: proxy %s refused CONNECT %s: %d %s", e.Proxy, e.Target, e.StatusCode, http.StatusText(e.StatusCode))
}

// CheckProxyConnect installs a hook on t's OnProxyConnectResponse that turns a
// CONNECT answered with a status other than 200 into a *ProxyConnectError, and
// returns t. A hook already there runs first; its error, if any, is returned
// as is. Call it before t is used, on a Transport of your own or a Clone:
// it modifies t. idem installs it on the base it builds for a nil
// Options.Base and on its clone of a Base with a Proxy, never on a Transport
// you give. Without it a refused CONNECT is an untyped error: retried
// (nothing was sent), then left pending once the attempts run out.
func CheckProxyConnect(t *http.Transport) *http.Transport {
	prev := t.OnProxyConnectResponse
	t.OnProxyConnectResponse = func(ctx context.Context, proxy *url.URL, req *http.Request, resp *http.Response) error {
		if prev != nil {
			if err := prev(ctx, proxy, req, resp); err != nil {
				return err
			}
		}
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		p := *proxy
		p.User = nil
		return &ProxyConnectError{Proxy: p.String(), Target: req.Host, StatusCode: resp.StatusCode}
	}
	return t
}

// idempotent reports whether RFC 9110 section 9.2.2 makes the method idempotent.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}
