// This file holds the checks and the stored form of a request: what net/http
// would refuse is refused before anything is written or sent; idempotency
// keys and operation IDs are minted and validated; the URL and headers are
// journaled without credentials.

package idem

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/idem-go/idem/journal"
)

// validRequest refuses what net/http could never send, and returns the
// request's method ("" means GET). The key header is left to callerKey,
// which says ErrInvalidKey.
func (t *Transport) validRequest(req *http.Request) (string, error) {
	m := method(req)
	switch u := req.URL; {
	case u == nil:
		return "", fmt.Errorf("%w: nil URL", ErrInvalidRequest)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%w: unsupported scheme %q", ErrInvalidRequest, u.Scheme)
	case u.Host == "":
		return "", fmt.Errorf("%w: no host in URL", ErrInvalidRequest)
	case !isToken(m):
		return "", fmt.Errorf("%w: invalid method %q", ErrInvalidRequest, req.Method)
	}
	// A host or port that does not parse is never dialed: net/http's error
	// reads as "retry", and Resume could never parse the journaled URL back.
	if !plainURL(req.URL) {
		if _, err := url.Parse(req.URL.String()); err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err // without the URL, which may hold a password
			}
			return "", fmt.Errorf("%w: invalid URL: %v", ErrInvalidRequest, err)
		}
	}
	// No request-target may hold a "#" (RFC 9112 section 3.2); journaled,
	// the URL would be parsed back without what follows it.
	if strings.Contains(req.URL.RawQuery, "#") {
		return "", fmt.Errorf("%w: invalid URL: \"#\" in the raw query", ErrInvalidRequest)
	}
	if p := req.URL.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%w: invalid port %q", ErrInvalidRequest, p)
		}
	}
	for name, values := range req.Header {
		if strings.EqualFold(name, t.cfg.KeyHeader) {
			continue
		}
		if !isToken(name) {
			return "", fmt.Errorf("%w: invalid header name %q", ErrInvalidRequest, name)
		}
		for _, v := range values {
			if !validFieldValue(v) {
				return "", fmt.Errorf("%w: invalid value for header %q", ErrInvalidRequest, name)
			}
		}
	}
	return m, nil
}

// validFieldValue reports whether v may be a field value: RFC 9110 section
// 5.5 allows visible characters, space, tab and obs-text (0x80-0xFF), so
// never another control character or DEL. net/http refuses the same.
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// plainURL reports whether u is of the common shape url.Parse(u.String())
// always takes back, so the round trip can be skipped: no opaque part or
// userinfo; a host of letters, digits, dots and hyphens, with an optional
// port of digits; no control character or "#" in the raw query (String does
// not escape it). FuzzPlainURL holds it to that.
func plainURL(u *url.URL) bool {
	if u.Opaque != "" || u.User != nil || hasCTL(u.RawQuery) || strings.Contains(u.RawQuery, "#") {
		return false
	}
	host, port, hasPort := strings.Cut(u.Host, ":")
	if host == "" || hasPort && (port == "" || len(port) > 5) {
		return false
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	for i := 0; i < len(port); i++ {
		if c := port[i]; c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// hasCTL reports whether s holds an ASCII control character or DEL, which
// url.Parse refuses anywhere in a URL.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
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

// storedURL is the request URL as journaled: without userinfo, fragment, or
// the query parameters named in sensitive, whose names it returns, sorted.
// An unusual URL is parsed again so that userinfo or a query hidden in an
// opaque part is dropped too.
func storedURL(u *url.URL, sensitive map[string]bool) (string, []string) {
	c := *u
	// net/http never sends the fragment, and it may hold a token (OAuth's
	// implicit flow puts access_token there): it is not journaled.
	c.User, c.Fragment, c.RawFragment = nil, "", ""
	var dropped []string
	c.RawQuery, dropped = stripQuery(c.RawQuery, sensitive)
	s := c.String()
	if c.Opaque == "" && c.Host != "" && !strings.Contains(c.RawQuery, "#") {
		// String escapes "@", "/", "?" and "#" in the host and "?" and "#"
		// in the path: parsed again, this gives back nothing more.
		return s, dropped
	}
	if p, err := url.Parse(s); err == nil {
		q, more := stripQuery(p.RawQuery, sensitive)
		if p.User != nil || more != nil || p.Fragment != "" {
			p.User, p.RawQuery, p.Fragment, p.RawFragment = nil, q, "", ""
			s = p.String()
			dropped = append(dropped, more...)
			slices.Sort(dropped)
			dropped = slices.Compact(dropped)
		}
	}
	return s, dropped
}

// stripQuery cuts from a raw query the parameters whose names, decoded as
// url.ParseQuery decodes them, are in names; the others keep their bytes and
// order. It returns the names cut, sorted, once each.
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

// maxKeyLen follows the IETF Idempotency-Key draft's advice and Stripe's limit.
const maxKeyLen = 255

// newKey returns a random (version 4) UUID from crypto/rand.
func newKey() (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("idem: generating idempotency key: %w", err)
	}
	return u.String(), nil
}

// validateKey accepts an idempotency key of 1..255 visible ASCII characters
// (VCHAR, RFC 5234: no space), as the server middleware does.
func validateKey(what, k string) error { return validateName(what, k, false) }

// validateOperationID accepts 1..255 visible ASCII characters, spaces
// allowed inside ("charge order 4827"): an operation ID never leaves the
// journal.
func validateOperationID(k string) error { return validateName("operation ID", k, true) }

func validateName(what, k string, spaces bool) error {
	if k == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, what)
	}
	if len(k) > maxKeyLen {
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalidKey, what, len(k), maxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		space := k[i] == ' ' && spaces && i > 0 && i < len(k)-1
		if c := k[i]; (c <= 0x20 || c > 0x7e) && !space {
			return fmt.Errorf("%w: %s has byte %#x at %d", ErrInvalidKey, what, c, i)
		}
	}
	return nil
}

// callerKey returns the key the caller chose, from the context or the request
// header (looked up case-insensitively), and whether there was one.
func callerKey(r *http.Request, header string, co *callOptions) (string, bool, error) {
	if co.hasKey {
		return co.key, true, validateKey("idempotency key", co.key)
	}
	vals := headerValues(r.Header, header)
	switch len(vals) {
	case 0:
		return "", false, nil
	case 1:
		return vals[0], true, validateKey("idempotency key", vals[0])
	default:
		return "", true, fmt.Errorf("%w: %d %s headers", ErrInvalidKey, len(vals), header)
	}
}

// storedHeader drops sensitive headers and the key header before writing,
// copying the values kept into one array, as http.Header.Clone does. A
// header kept whole, every name canonical, is returned as it is: a Store
// copies what it keeps.
func (t *Transport) storedHeader(h http.Header) http.Header {
	n, whole := 0, true
	for k, v := range h {
		n += len(v)
		whole = whole && len(v) > 0 && k == http.CanonicalHeaderKey(k) && !t.cfg.sensitive[k] && !strings.EqualFold(k, t.cfg.KeyHeader)
	}
	if whole {
		return h
	}
	values := make([]string, 0, n)
	out := make(http.Header, len(h))
	for k, v := range h {
		ck := http.CanonicalHeaderKey(k)
		if t.cfg.sensitive[ck] || strings.EqualFold(k, t.cfg.KeyHeader) {
			continue
		}
		var vs []string // nil for no values, as before
		if len(v) > 0 {
			values = append(values, v...)
			vs = values[len(values)-len(v) : len(values) : len(values)]
		}
		if ov := out[ck]; len(ov) > 0 {
			// Spelled two ways: both kept, under the canonical name.
			vs = append(ov[:len(ov):len(ov)], vs...)
		}
		out[ck] = vs
	}
	return out
}

// nameCall reads the call's key, operation ID and identity, names its
// operation, and builds the record a new operation gets; a key is minted
// only when the caller gave none.
func (t *Transport) nameCall(req *http.Request, buf []byte, co *callOptions) (*call, error) {
	key, hasKey, err := callerKey(req, t.cfg.KeyHeader, co)
	if err != nil {
		return nil, err
	}
	if co.hasOpID {
		if err := validateOperationID(co.opID); err != nil {
			return nil, err
		}
	}
	id, err := t.bindingOf(req)
	if err != nil {
		return nil, err
	}
	if !hasKey {
		// Minted once: the lock and a new record use the same key.
		if key, err = newKey(); err != nil {
			return nil, err
		}
	}
	c := &call{req: req, buf: buf, sum: bodySum(buf), key: key, hasKey: hasKey, opID: co.opID, identity: id,
		limits: co.limits, reconcile: co.reconcile}
	c.name = journal.Name{Key: key}
	if co.hasOpID {
		c.name = journal.Name{OperationID: co.opID}
	}
	c.fresh = t.newRecord(c, co.method)
	return c, nil
}

// newRecord returns the record of c's new operation, bound as c is (its
// binding); writing it ahead makes it pending (EventCreate).
func (t *Transport) newRecord(c *call, method string) *Record {
	req := c.req
	u, droppedQuery := storedURL(req.URL, t.cfg.sensitiveQuery)
	host := req.Host
	if host == req.URL.Host {
		host = "" // not an override: http.NewRequest sets it to the URL's
	}
	rec := &Record{Key: c.key, CallerKey: c.hasKey, OperationID: c.opID, Method: method, URL: u, Host: host,
		Header: t.storedHeader(req.Header), DroppedQuery: droppedQuery, Body: c.buf, BodySHA256: c.sum,
		// The binding: the declared identity, or else the credentials' tag.
		Identity: c.identity.identity, CredentialTag: c.identity.tag, Dropped: c.identity.dropped,
		ContentType: c.identity.contentType, ContentEncoding: c.identity.contentEncoding}
	return rec
}
