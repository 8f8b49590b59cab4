// This file checks a request before anything is written or sent: what
// net/http would refuse anyway is refused up front, so it is never journaled
// and retried in vain.

package idem

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// validRequest refuses what net/http could never send. The key header is left
// to callerKey, which says ErrInvalidKey.
func (t *Transport) validRequest(req *http.Request) error {
	switch u := req.URL; {
	case u == nil:
		return fmt.Errorf("%w: nil URL", ErrInvalidRequest)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: unsupported scheme %q", ErrInvalidRequest, u.Scheme)
	case u.Host == "":
		return fmt.Errorf("%w: no host in URL", ErrInvalidRequest)
	case !isToken(method(req)):
		return fmt.Errorf("%w: invalid method %q", ErrInvalidRequest, req.Method)
	}
	for name, values := range req.Header {
		if strings.EqualFold(name, t.cfg.KeyHeader) {
			continue
		}
		if !isToken(name) {
			return fmt.Errorf("%w: invalid header name %q", ErrInvalidRequest, name)
		}
		for _, v := range values {
			// RFC 9110 section 5.5: CR, LF and NUL are never valid in a field value.
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("%w: invalid value for header %q", ErrInvalidRequest, name)
			}
		}
	}
	return nil
}

// method is the request method; "" means GET, as in net/http.
func method(req *http.Request) string { return cmp.Or(req.Method, http.MethodGet) }

// isToken reports whether s is an RFC 9110 section 5.6.2 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// storedURL is the request URL without userinfo, which may hold a password.
// The result is parsed again so that userinfo hidden in an opaque URL is
// dropped too.
func storedURL(u *url.URL) string {
	c := *u
	c.User = nil
	s := c.String()
	if p, err := url.Parse(s); err == nil && p.User != nil {
		p.User = nil
		s = p.String()
	}
	return s
}
