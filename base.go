// This file holds the base RoundTripper a Transport sends through: its own
// clone of http.DefaultTransport when Options.Base is nil, a clone of the
// caller's *http.Transport when that one has a proxy, and the ways to reach
// its connections.

package idem

import "net/http"

// defaultBase returns the base of a Transport whose Options.Base is nil: a
// clone of http.DefaultTransport with CheckProxyConnect, so a refused CONNECT
// is typed, or http.DefaultTransport itself if the program replaced it with
// another kind of RoundTripper (idem never modifies it).
func defaultBase() http.RoundTripper {
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		return CheckProxyConnect(dt.Clone())
	}
	return http.DefaultTransport
}

// callerBase returns the base of a Transport whose Options.Base is rt. An
// *http.Transport with a Proxy gets the classification the default base has:
// it is cloned (http.Transport.Clone) with CheckProxyConnect installed on
// the clone, after any OnProxyConnectResponse of the caller's, so that a
// proxy's refusal of CONNECT (a 407 for wrong credentials) fails the
// operation at once instead of being retried as "nothing sent" and left
// pending. The caller's Transport is never modified. Any other base,
// including an *http.Transport without a Proxy (it never sends CONNECT), is
// used as it is.
func callerBase(rt http.RoundTripper) http.RoundTripper {
	ht, ok := rt.(*http.Transport)
	if !ok || ht.Proxy == nil {
		return rt
	}
	return CheckProxyConnect(ht.Clone())
}

// CloseIdleConnections closes the idle connections of the base RoundTripper,
// if it has a CloseIdleConnections method; http.Client.CloseIdleConnections
// calls it. Connections in use are left alone.
func (t *Transport) CloseIdleConnections() {
	t.setup()
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
