// This file holds the base RoundTripper a Transport sends through when
// Options.Base is nil, and the ways to reach its connections.

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

// CloseIdleConnections closes the idle connections of the base RoundTripper,
// if it has a CloseIdleConnections method; http.Client.CloseIdleConnections
// calls it. Connections in use are left alone.
func (t *Transport) CloseIdleConnections() {
	t.setup()
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
