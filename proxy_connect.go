// This file types a proxy's refusal of a CONNECT tunnel. Without a hook,
// net/http reports a CONNECT answered with anything but 200 as an error made
// of the proxy's reason phrase alone, which only its text tells apart.

package idem

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

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
// it modifies t.
//
// Options.Base nil gets a clone of http.DefaultTransport with this hook, and
// an Options.Base that is an *http.Transport with a Proxy gets a clone of
// itself with it (see Options.Base); idem never installs it on a Transport
// the caller gives. Without it, as behind a RoundTripper that wraps an
// *http.Transport, a refused CONNECT is an untyped error: idem retries it
// (nothing was sent) and leaves the operation pending once the attempts run
// out.
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
