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
	return Scope{
		Identity: hex.EncodeToString(sum[:]),
		Method:   r.Method,
		Path:     r.URL.EscapedPath(),
		Key:      key,
	}
}

// authIdentity is the identity when Options.Identity is nil: the Authorization header.
func authIdentity(r *http.Request) (string, error) {
	return "authorization:" + r.Header.Get("Authorization"), nil
}
