// key.go reads the idempotency key from a request (draft section 2.1: an RFC 8941 sf-string,
// also accepted bare, as Stripe's clients send it) and scopes it to the identity, method
// and path that sent it.

package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
)

// MaxKeyLen bounds a key, as Stripe does; the draft sets no limit.
const MaxKeyLen = 255

// errBadKey is what parseKey returns for a malformed key; it never leaves the package.
var errBadKey = errors.New("server: malformed idempotency key")

// parseKey returns the key in the header values vs: "" with a nil error when there is none;
// errBadKey when there is more than one (draft section 2.1 forbids it), or the one is not
// 1..MaxKeyLen visible ASCII characters (VCHAR, 0x21-0x7e: no space, no control character),
// bare or as an sf-string.
func parseKey(vs []string) (string, error) {
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", errBadKey
	}
	v := strings.Trim(vs[0], " \t")
	if v == "" {
		return "", errBadKey // an empty key is a client bug, not a missing key
	}
	if v[0] == '"' {
		var err error
		if v, err = unquoteSFString(v); err != nil {
			return "", err
		}
		if v == "" {
			return "", errBadKey
		}
	}
	if len(v) > MaxKeyLen {
		return "", errBadKey
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= 0x20 || v[i] > 0x7e {
			return "", errBadKey
		}
	}
	return v, nil
}

// unquoteSFString decodes an RFC 8941 section 3.3.3 sf-string: DQUOTE *chars DQUOTE, where
// chars are printable ASCII and only \" and \\ are escapes.
func unquoteSFString(v string) (string, error) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", errBadKey
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v)-1 || (v[i] != '"' && v[i] != '\\') {
				return "", errBadKey
			}
			b.WriteByte(v[i])
		case c == '"' || c < 0x20 || c > 0x7e:
			return "", errBadKey
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// scopeOf returns the Scope of key in r for identity id: only a hash of id is kept, so a
// Store never holds a credential.
func scopeOf(r *http.Request, key, id string) Scope {
	sum := sha256.Sum256([]byte(id))
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	return Scope{
		Identity: string(hexSum[:]),
		Method:   r.Method,
		Path:     canonicalPath(r.URL.EscapedPath()),
		Key:      key,
	}
}

// canonicalPath returns the escaped path p with its percent-encodings normalised as RFC
// 3986 section 6.2.2 says: an encoded unreserved character (letters, digits, "-._~") is
// the character itself, and the other encodings take upper-case hex digits. So /%70ayments
// and /payments, which one route serves and a proxy may rewrite one into the other, name
// one operation, while /a%2Fb stays apart from /a/b. A path without '%' is returned as is.
func canonicalPath(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		hi, lo := -1, -1
		if p[i] == '%' && i+2 < len(p) {
			hi, lo = unhex(p[i+1]), unhex(p[i+2])
		}
		if hi < 0 || lo < 0 {
			b.WriteByte(p[i])
			continue
		}
		c := byte(hi<<4 | lo)
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			b.Write([]byte{'%', hexDigits[hi], hexDigits[lo]})
		}
		i += 2
	}
	return b.String()
}

// unhex is the value of the hex digit c, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// errCookieIdentity refuses, under the default identity, a request whose only
// credentials are cookies.
var errCookieIdentity = errors.New("idempotency: the request carries cookies but no Authorization header, " +
	"and Options.Identity is nil: set Identity to the user behind the session")

// authIdentity is the identity when Options.Identity is nil: the Authorization
// header. A request that carries cookies but no Authorization is refused
// (S33): scoping by the cookies would make a retry whose cookie changed (a
// load balancer's stickiness cookie changes on every response) a new
// operation, and ignoring them would make every such user one scope.
func authIdentity(r *http.Request) (string, error) {
	auth := r.Header.Get("Authorization")
	if auth == "" && len(r.Header.Values("Cookie")) > 0 {
		return "", errCookieIdentity
	}
	return "authorization:" + auth, nil
}
