// This file mints and validates idempotency keys and operation IDs.

package idem

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

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

// validateKey accepts 1..255 visible ASCII characters (space allowed inside).
// It also serves operation IDs, which are stored and shown the same way.
func validateKey(what, k string) error {
	if k == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, what)
	}
	if len(k) > maxKeyLen {
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalidKey, what, len(k), maxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e || (c == ' ' && (i == 0 || i == len(k)-1)) {
			return fmt.Errorf("%w: %s has byte %#x at %d", ErrInvalidKey, what, c, i)
		}
	}
	return nil
}

// callerKey returns the key the caller chose, from the context or the request
// header (looked up case-insensitively), and whether there was one.
func callerKey(r *http.Request, header string) (string, bool, error) {
	if k, ok := keyFrom(r.Context()); ok {
		return k, true, validateKey("idempotency key", k)
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

// headerValues finds a header whatever its spelling, even one set in the map
// without canonicalization.
func headerValues(h http.Header, name string) []string {
	var vals []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			vals = append(vals, v...)
		}
	}
	return vals
}

// setHeader replaces every spelling of name with values, under the
// canonical name.
func setHeader(h http.Header, name string, values []string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
	h[http.CanonicalHeaderKey(name)] = values
}
