// This file holds the classification table: what an attempt's outcome (an
// error or a status) means for the operation. The attempt loop in attempt.go
// acts on the Class; DefaultClassifier is the table in the README.

package idem

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
)

// Class is what the attempt loop does with one attempt's outcome.
type Class int

const (
	// Final settles the operation and returns the response to the caller.
	Final Class = iota
	// Retry means nothing reached the server, or the server asked to try again.
	Retry
	// RetryIfSafe means the server may have acted: retry only a request that
	// carries an idempotency key or has an idempotent method (RFC 9110 section
	// 9.2.2); otherwise return ErrOutcomeUnknown.
	RetryIfSafe
	// Permanent means no retry can help; the operation is marked failed.
	Permanent
)

func (c Class) String() string {
	switch c {
	case Final:
		return "final"
	case Retry:
		return "retry"
	case RetryIfSafe:
		return "retry-if-safe"
	case Permanent:
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
}

// A Classifier maps an attempt's outcome to a Class. It must be safe for
// concurrent use and must not read or close the response body. The caller's own
// context ending is handled before the Classifier is asked.
type Classifier func(Attempt) Class

// DefaultClassifier is idem's classification table:
//
//	nothing reached the server (dial, DNS, not written)    Retry
//	the server may have acted (reset, EOF, timeout)        RetryIfSafe
//	408, 425, 429, 500, 502, 503, 504; 409 when keyed      Retry
//	certificate errors, ErrInvalidRequest, ErrBodyTooLarge Permanent
//	a status outside 100..599 (as 500: RFC 9110 section 15) Retry
//	any other status (2xx, 3xx, other 4xx, 501, 505)       Final
//
// Errors are matched with errors.Is and errors.As, never by their text.
func DefaultClassifier(a Attempt) Class {
	if a.Err != nil {
		return classifyError(a.Err, a.Wrote)
	}
	code := a.Response.StatusCode
	if code < 100 || code > 599 {
		// RFC 9110 section 15: a client processes an invalid status code as
		// a 5xx, so as 500.
		return Retry
	}
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Retry
	case http.StatusConflict:
		// The IETF Idempotency-Key draft answers 409 while a request with the
		// same key is still being processed.
		if a.Keyed {
			return Retry
		}
	}
	return Final
}

func classifyError(err error, wrote bool) Class {
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidCert x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		opErr       *net.OpError
		dnsErr      *net.DNSError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalidCert),
		errors.As(err, &recordErr),
		errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrBodyTooLarge):
		return Permanent
	case errors.As(err, &dnsErr), errors.As(err, &opErr) && opErr.Op == "dial":
		return Retry
	case !wrote:
		return Retry
	}
	return RetryIfSafe
}
