// This file sends the retry of a 421 Misdirected Request on a new connection,
// as RFC 9110 section 15.5.20 asks: the connection that got the 421 reached
// a server that is not configured for the request's origin. net/http does
// not retry a 421 itself.

package idem

import "net/http"

// misdirected reports whether resp is a 421 Misdirected Request.
func misdirected(resp *http.Response) bool {
	return resp != nil && resp.StatusCode == http.StatusMisdirectedRequest
}

// newConnBase returns the RoundTripper for an attempt that must not reuse a
// connection, and a function to call once the attempt is over (its response
// body closed, or its error returned).
//
// A base *http.Transport is cloned: the clone has the same settings and hooks
// and an empty connection pool, so the attempt dials a new connection, for
// HTTP/1.1 and HTTP/2 alike; its connections are closed once the attempt is
// over. Any other base only has its idle connections closed, if it can, so
// a connection it keeps busy (an HTTP/2 connection with other streams) may
// carry the retry.
func (t *Transport) newConnBase() (http.RoundTripper, func()) {
	base := t.base()
	if ht, ok := base.(*http.Transport); ok {
		fresh := ht.Clone()
		return fresh, fresh.CloseIdleConnections
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return base, func() {}
}
