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

// validateKey accepts an idempotency key of 1..255 visible ASCII characters
// (VCHAR, RFC 5234: no space), as the server middleware does and the IETF
// draft's sf-string keys are usually spelled.
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
// without canonicalization. Under one spelling, the result is the map's own
// slice, not a copy: callers must not modify it.
func headerValues(h http.Header, name string) []string {
	var vals []string
	for k, v := range h {
		switch {
		case !strings.EqualFold(k, name):
		case vals == nil:
			vals = v
		default: // another spelling: capped, so the append copies
			vals = append(vals[:len(vals):len(vals)], v...)
		}
	}
	return vals
}
