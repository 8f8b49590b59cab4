// This file binds an operation to the identity it was created under (the
// declared tenant or account, else a keyed hash of its creator's
// credentials) and to its representation headers, and makes the credential
// tags under the Store's identity key.

package idem

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/idem-go/idem/journal"
)

// maxIdentityLen bounds a declared identity, in bytes.
const maxIdentityLen = 255

type identityCtxKey struct{}

// WithIdentity returns a context that declares the identity a request is made
// for: the tenant, customer or account on whose behalf it is sent, such as
// "acct_1Hx9". A journaled operation is bound to the identity it was created
// under: a call under another identity that names it (WithOperationID, or the
// same caller's key) fails with ErrIdentityMismatch, and nothing is sent. The
// identity is journaled as given, so it must not be a secret; it must be
// valid UTF-8 of at most 255 bytes with no control character, and RoundTrip
// refuses one equal to a credential the request carries (ErrInvalidRequest).
// "" declares none. Where Options.Identity is set too, the two must agree.
// Resume puts the operation's identity on the context of the request it
// rebuilds, for Options.PrepareResume to read with IdentityFrom.
func WithIdentity(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, identityCtxKey{}, id)
}

// IdentityFrom returns the identity declared in ctx with WithIdentity, and
// whether one is (a non-empty one). In Options.PrepareResume,
// IdentityFrom(req.Context()) is the identity the resumed operation was
// created under; false if it was created with none declared.
func IdentityFrom(ctx context.Context) (string, bool) {
	id, _ := ctx.Value(identityCtxKey{}).(string)
	return id, id != ""
}

// binding is what binds a journaled call to an operation: its declared
// identity, or else its credentials, and its representation headers.
type binding struct {
	req                          *http.Request
	identity                     string   // declared; "" if none
	tag                          string   // the credential tag, once made (credentialTag)
	dropped                      []string // the sensitive headers req carries (droppedHeaders)
	contentType, contentEncoding string   // normalized by representation
}

// bindingOf reads a journaled request's binding before anything is written
// or sent, with its credential tag unless it declares an identity. It fails
// with ErrInvalidRequest for an invalid or disputed identity, or with
// Options.Identity's own error.
func (t *Transport) bindingOf(req *http.Request) (binding, error) {
	id, err := t.declaredIdentity(req)
	if err != nil {
		return binding{}, err
	}
	b := binding{req: req, identity: id, dropped: t.droppedHeaders(req.Header)}
	if id == "" {
		t.credentialTag(&b)
	}
	b.contentType, b.contentEncoding = t.representation(req.Header)
	return b, nil
}

// declaredIdentity is WithIdentity's identity or Options.Identity's,
// whichever is not empty; both set and different is ErrInvalidRequest.
func (t *Transport) declaredIdentity(req *http.Request) (string, error) {
	id, _ := IdentityFrom(req.Context())
	if t.cfg.Identity != nil {
		fromReq, err := t.cfg.Identity(req)
		if err != nil {
			return "", fmt.Errorf("idem: Options.Identity: %w", err)
		}
		switch {
		case id == "":
			id = fromReq
		case fromReq != "" && fromReq != id:
			return "", fmt.Errorf("%w: WithIdentity and Options.Identity name different identities", ErrInvalidRequest)
		}
	}
	if id == "" {
		return "", nil
	}
	if len(id) > maxIdentityLen || !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl) {
		return "", fmt.Errorf("%w: identity: want valid UTF-8, at most %d bytes, no control character", ErrInvalidRequest, maxIdentityLen)
	}
	if t.isCredential(req, id) {
		return "", fmt.Errorf("%w: identity: equal to a credential the request carries; an identity is journaled, so name the account instead", ErrInvalidRequest)
	}
	return id, nil
}

// isCredential reports whether id is a credential req carries (a sensitive
// header's value or its part after the scheme, the URL's password, a
// sensitive query value), which journaled as an identity would reach disk.
func (t *Transport) isCredential(req *http.Request, id string) bool {
	for _, name := range t.droppedHeaders(req.Header) {
		for _, v := range headerValues(req.Header, name) {
			_, after, _ := strings.Cut(strings.TrimSpace(v), " ")
			if v == id || strings.TrimSpace(after) == id {
				return true
			}
		}
	}
	if pw, ok := req.URL.User.Password(); ok && pw == id {
		return true
	}
	for _, p := range t.sensitiveParams(req.URL.RawQuery) {
		if _, v, _ := strings.Cut(p, "="); v == id {
			return true
		}
	}
	return false
}

// admit checks that a call bound by b may run rec, found in the journal
// under name: same identity (else ErrIdentityMismatch, checked first so that
// another identity learns nothing of rec) and same representation headers
// (else ErrKeyReuse).
func (t *Transport) admit(rec *Record, b *binding, name journal.Name) error {
	if !t.sameIdentity(rec, b) {
		what, id := "operation", name.OperationID
		if id == "" {
			what, id = "idempotency key", name.Key
		}
		return fmt.Errorf("%w: %s %q was created under another identity; nothing was sent", ErrIdentityMismatch, what, id)
	}
	if ct, ce, known := t.recordRepresentation(rec); known && (ct != b.contentType || ce != b.contentEncoding) {
		return fmt.Errorf("%w: operation %q (key %s) was Content-Type %q, Content-Encoding %q", ErrKeyReuse,
			rec.OperationID, rec.Key, ct, ce)
	}
	return nil
}

// sameIdentity reports whether a call bound by b is under rec's identity: the
// same declared identity if rec has one, else the same credentials. A record
// with neither, from before identities were bound, is anyone's.
func (t *Transport) sameIdentity(rec *Record, b *binding) bool {
	switch {
	case rec.Identity != "":
		return b.identity == rec.Identity
	case rec.CredentialTag != "":
		return subtle.ConstantTimeCompare([]byte(t.credentialTag(b)), []byte(rec.CredentialTag)) == 1
	}
	return true
}

// credentialTag returns the tag of b's credentials, made once.
func (t *Transport) credentialTag(b *binding) string {
	if b.tag == "" {
		b.tag = t.tags.tag(t.credentials(b.req, b.dropped))
	}
	return b.tag
}

// credentials encodes req's credentials unambiguously (length-prefixed) in a
// fixed order: sensitive headers by name, each with its values sorted; URL
// userinfo; sensitive query parameters, sorted. None encodes as empty, a
// credential set too: a call with credentials is not one without.
func (t *Transport) credentials(req *http.Request, dropped []string) []byte {
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, name := range dropped { // sorted
		// A header spelled two ways is read in map order.
		vals := slices.Sorted(slices.Values(headerValues(req.Header, name)))
		b = append(b, 'h')
		str(name)
		b = binary.AppendUvarint(b, uint64(len(vals)))
		for _, v := range vals {
			str(v)
		}
	}
	if u := req.URL.User; u != nil {
		pw, hasPw := u.Password()
		b = append(b, 'u')
		str(u.Username())
		if hasPw {
			b = append(b, 'p')
			str(pw)
		}
	}
	for _, p := range t.sensitiveParams(req.URL.RawQuery) {
		b = append(b, 'q')
		str(p)
	}
	return b
}

// sensitiveParams returns the sensitive parameters of a raw query as
// "name=value", the name decoded as stripQuery decodes it and the value as
// sent, sorted.
func (t *Transport) sensitiveParams(raw string) []string {
	if raw == "" || len(t.cfg.sensitiveQuery) == 0 {
		return nil
	}
	var ps []string
	for part := range strings.SplitSeq(raw, "&") {
		name, value, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && t.cfg.sensitiveQuery[n] {
			ps = append(ps, n+"="+value)
		}
	}
	slices.Sort(ps)
	return ps
}

// representation returns the representation headers of h that are part of
// an operation's fingerprint, normalized: Content-Type with its media type
// and parameter names lowercased and its parameters sorted (RFC 9110 section
// 8.3.1: they are case-insensitive), Content-Encoding's codings lowercased and
// comma-separated (section 8.4.1). A header named in the sensitive headers is
// left out, as it is never journaled.
func (t *Transport) representation(h http.Header) (contentType, contentEncoding string) {
	if !t.cfg.sensitive["Content-Type"] {
		var types []string
		for _, v := range headerValues(h, "Content-Type") {
			types = append(types, mediaType(v))
		}
		contentType = strings.Join(types, ", ")
	}
	if !t.cfg.sensitive["Content-Encoding"] {
		var codings []string
		for _, v := range headerValues(h, "Content-Encoding") {
			for c := range strings.SplitSeq(v, ",") {
				if c = strings.ToLower(strings.TrimSpace(c)); c != "" {
					codings = append(codings, c)
				}
			}
		}
		contentEncoding = strings.Join(codings, ",")
	}
	return contentType, contentEncoding
}

// mediaType normalizes a Content-Type value; one that does not parse is
// kept as sent, trimmed.
func mediaType(v string) string {
	if plainMediaType(v) {
		return v // as parsedMediaType returns it, without its five allocations
	}
	return parsedMediaType(v)
}

// plainMediaType reports whether v is "type/subtype" in lowercase token
// characters (RFC 9110 section 5.6.2), with no parameter and no space, as
// most requests send it ("application/json"): already normalized.
func plainMediaType(v string) bool {
	slash := strings.IndexByte(v, '/')
	if slash <= 0 || slash == len(v)-1 {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case i == slash, 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) < 0:
			return false
		}
	}
	return true
}

func parsedMediaType(v string) string {
	if mt, params, err := mime.ParseMediaType(v); err == nil {
		if s := mime.FormatMediaType(mt, params); s != "" {
			return s
		}
	}
	return strings.TrimSpace(v)
}

// recordRepresentation returns the representation headers rec was created
// with, and whether they are known. An older record has them only in its
// Header, which a settled one no longer has: any representation matches it.
func (t *Transport) recordRepresentation(rec *Record) (contentType, contentEncoding string, known bool) {
	switch {
	case rec.Identity != "" || rec.CredentialTag != "": // written with them
		return rec.ContentType, rec.ContentEncoding, true
	case rec.State == StateSettled:
		return "", "", false
	}
	contentType, contentEncoding = t.representation(rec.Header)
	return contentType, contentEncoding, true
}

// credentialTagContext separates credential tags from any other use of the
// key, and names the encoding of credentials, should it ever change.
const credentialTagContext = "idem credential tag v1\x00"

// tagger makes credential tags under one identity key. It is safe for
// concurrent use.
type tagger struct {
	key    []byte
	hashes sync.Pool     // of *tagHash under key
	none   func() string // the empty credential set's tag, what most calls carry
}

func newTagger(key []byte) *tagger {
	g := &tagger{key: key}
	g.none = sync.OnceValue(func() string { return g.hmac(nil) })
	return g
}

// tag is Record.CredentialTag for a credential set as credentials encodes
// it: HMAC-SHA-256 under the identity key, cut to its first 128 bits (RFC
// 2104 section 5 allows cutting to half the output), in hex.
func (g *tagger) tag(creds []byte) string {
	if len(creds) == 0 {
		return g.none()
	}
	return g.hmac(creds)
}

func (g *tagger) hmac(creds []byte) string {
	h, _ := g.hashes.Get().(*tagHash)
	if h == nil {
		h = &tagHash{mac: hmac.New(sha256.New, g.key)}
	}
	h.mac.Write(credentialTagPrefix)
	h.mac.Write(creds)
	tag := hex.EncodeToString(h.mac.Sum(h.sum[:0])[:16])
	h.mac.Reset() // back to the keyed state, for the next tag
	g.hashes.Put(h)
	return tag
}

// tagHash is an HMAC-SHA-256 under the identity key, pooled between tags:
// hmac.New costs five allocations a call.
type tagHash struct {
	mac hash.Hash
	sum [sha256.Size]byte
}

var credentialTagPrefix = []byte(credentialTagContext)

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

// droppedHeaders names the sensitive headers the request carries, so Resume
// can tell when PrepareResume did not put them back.
func (t *Transport) droppedHeaders(h http.Header) []string {
	var names []string
	for k := range h {
		if ck := http.CanonicalHeaderKey(k); t.cfg.sensitive[ck] && !slices.Contains(names, ck) {
			names = append(names, ck)
		}
	}
	slices.Sort(names)
	return names
}
