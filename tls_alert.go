// This file reads the TLS alert a server sent, for classify.go: an alert that
// refuses the handshake or the client's certificate means no retry of the
// same request can succeed, and that no HTTP handler saw it.

package idem

import (
	"crypto/tls"
	"errors"
	"reflect"
)

// TLS alert codes (RFC 8446 section 6.2) that refuse a handshake or a
// certificate. A server sends them before it reads any application data: in
// TLS 1.3 a client learns of a refused client certificate only on its first
// read, after it wrote its request, yet the server never processed it.
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

// tlsAlert returns the TLS alert that err carries. crypto/tls returns an alert
// received from the peer as a *net.OpError (Op "remote error") whose Err is
// its unexported alert type, which errors.As cannot reach as tls.AlertError
// (only QUIC connections wrap AlertError). tlsAlert takes tls.AlertError when
// present and otherwise finds crypto/tls's alert type by reflection: a uint8
// type named alert in package crypto/tls, whose value is the alert code. It
// never reads the error's text.
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
