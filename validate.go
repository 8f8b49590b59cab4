// This file checks a request before anything is written or sent: what
// net/http would refuse anyway is refused up front, so it is never journaled
// and retried in vain.

package idem

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
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
	// A host or port that does not parse (a space or a control character in
	// it) is never dialed: net/http fails before writing anything, which reads
	// as "retry", and Resume, which parses the journaled URL back, would keep
	// it pending for good.
	if _, err := url.Parse(req.URL.String()); err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL, which may hold a password
		}
		return fmt.Errorf("%w: invalid URL: %v", ErrInvalidRequest, err)
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

// storedURL is the request URL as journaled: without userinfo, which may
// hold a password, nor the query parameters named in sensitive
// (Options.SensitiveQueryParams), whose names it returns, sorted. The result
// is parsed again so that userinfo or a query hidden in an opaque URL is
// dropped too.
func storedURL(u *url.URL, sensitive map[string]bool) (string, []string) {
	c := *u
	c.User = nil
	var dropped []string
	c.RawQuery, dropped = stripQuery(c.RawQuery, sensitive)
	s := c.String()
	if p, err := url.Parse(s); err == nil {
		q, more := stripQuery(p.RawQuery, sensitive)
		if p.User != nil || more != nil {
			p.User, p.RawQuery = nil, q
			s = p.String()
			dropped = append(dropped, more...)
			slices.Sort(dropped)
			dropped = slices.Compact(dropped)
		}
	}
	return s, dropped
}

// stripQuery cuts from a raw query the parameters whose names, decoded as
// url.ParseQuery decodes them, are in names. The others keep their bytes and
// their order, so PrepareResume can rebuild the exact query. It returns the
// names cut, sorted, once each.
func stripQuery(raw string, names map[string]bool) (string, []string) {
	if raw == "" || len(names) == 0 {
		return raw, nil
	}
	var kept, dropped []string
	for part := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && names[n] {
			dropped = append(dropped, n)
			continue
		}
		kept = append(kept, part)
	}
	if dropped == nil {
		return raw, nil
	}
	slices.Sort(dropped)
	return strings.Join(kept, "&"), slices.Compact(dropped)
}
