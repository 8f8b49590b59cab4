// keys.go is the server side of the Idempotency-Key protocol: reading the key, scoping it to
// the client, and the store that registers a key atomically, detects a reused key with a
// different fingerprint, and keeps results for replay until they expire. create.go drives it.

package testserver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// maxKeyLen bounds a key, as Stripe does; the IETF draft sets no limit.
const maxKeyLen = 255

// errBadKey is returned by parseKey for a malformed key.
var errBadKey = errors.New("testserver: malformed idempotency key")

// parseKey returns the key in a header value: bare, or an RFC 8941 sf-string ("abc", with \"
// and \\ escapes). It returns "" for a missing or empty key.
func parseKey(v string) (string, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, `"`) {
		var err error
		if v, err = unquoteSFString(v); err != nil {
			return "", err
		}
	}
	if len(v) > maxKeyLen {
		return "", errBadKey
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", errBadKey
		}
	}
	return v, nil
}

// unquoteSFString decodes an RFC 8941 section 3.3.3 string: DQUOTE *chars DQUOTE, where chars
// are printable ASCII and only \" and \\ are escapes.
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

// scope is what a key means: the same key from another client, method or path is another
// operation.
type scope struct {
	identity, method, path, key string
}

// scopeOf returns the scope of key in r. The identity is a hash of what identity returns
// for r, or, if identity is nil, of the Authorization header; "" is "anonymous". Either way
// only the hash is kept, so a credential itself never is.
func scopeOf(r *http.Request, key string, identity func(*http.Request) string) scope {
	id, prefix := r.Header.Get("Authorization"), "auth:"
	if identity != nil {
		id, prefix = identity(r), "id:"
	}
	if id == "" {
		id = "anonymous"
	} else {
		sum := sha256.Sum256([]byte(id))
		id = prefix + hex.EncodeToString(sum[:16])
	}
	return scope{identity: id, method: r.Method, path: r.URL.Path, key: key}
}

// outcome is what keyStore.begin decided for a request.
type outcome int

const (
	keyRegistered outcome = iota // new key: the caller processes, then complete or abandon
	keyInProgress                // another request holds the key: 409
	keyMismatch                  // the key was used with another fingerprint: 422
	keyReplay                    // the result is stored: replay it
)

// String names an outcome for logs.
func (o outcome) String() string {
	switch o {
	case keyRegistered:
		return "new"
	case keyInProgress:
		return "in progress"
	case keyMismatch:
		return "fingerprint mismatch"
	case keyReplay:
		return "replay"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// keyEntry is one key's state. res is nil while in progress and immutable once set.
type keyEntry struct {
	fingerprint [sha256.Size]byte
	res         *result
	expires     time.Time // set when res is stored
}

// keyStore maps scopes to their entries. It is safe for concurrent use.
type keyStore struct {
	ttl time.Duration

	mu      sync.Mutex
	entries map[scope]*keyEntry
	adds    int // registrations since the last sweep of expired entries
}

// sweepEvery is how many registrations pass between sweeps of expired entries, so a
// long-running "idem serve" does not grow without bound.
const sweepEvery = 1024

func newKeyStore(ttl time.Duration) *keyStore {
	return &keyStore{ttl: ttl, entries: make(map[scope]*keyEntry)}
}

// begin looks sc up at now and registers it if it is new or expired. For keyRegistered the
// caller must later call complete or abandon with the returned entry; for keyReplay the
// entry's res is the stored result.
func (ks *keyStore) begin(sc scope, fp [sha256.Size]byte, now time.Time) (outcome, *keyEntry) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if e, ok := ks.entries[sc]; ok && !e.expired(now) {
		switch {
		case e.fingerprint != fp:
			return keyMismatch, e
		case e.res == nil:
			return keyInProgress, e
		default:
			return keyReplay, e
		}
	}
	ks.adds++
	if ks.adds >= sweepEvery {
		ks.adds = 0
		for s, e := range ks.entries {
			if e.expired(now) {
				delete(ks.entries, s)
			}
		}
	}
	e := &keyEntry{fingerprint: fp}
	ks.entries[sc] = e
	return keyRegistered, e
}

// complete stores res for the registered entry e; it expires ttl after now.
func (ks *keyStore) complete(e *keyEntry, res *result, now time.Time) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	e.res = res
	e.expires = now.Add(ks.ttl)
}

// abandon unregisters e, which stored nothing, so a retry with the key can proceed.
func (ks *keyStore) abandon(sc scope, e *keyEntry) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.entries[sc] == e {
		delete(ks.entries, sc)
	}
}

// expired reports whether e holds a result whose time is up. An entry in progress never
// expires: its request is still running.
func (e *keyEntry) expired(now time.Time) bool {
	return e.res != nil && !now.Before(e.expires)
}
