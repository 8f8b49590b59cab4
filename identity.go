// This file binds an operation to the identity it was created under, so that
// one journal can serve calls made for several tenants or API keys: the same
// operation ID or caller's key under another identity is refused
// (ErrIdentityMismatch) before anything is sent. transport.go calls
// bindingOf, bind and admit; resume.go calls resumeContext and checkResumed;
// identity_tag.go makes credential tags under the Store's identity key.
//
// The identity is what the caller declares (Options.Identity, WithIdentity):
// a tenant, customer or account name. It is journaled as given (sealed under
// Options.Journal.Encryption), so that Resume can hand it back to PrepareResume. A
// credential is the wrong identity, since a refreshed token must stay the
// same operation. With none declared, the operation is bound to its
// creator's credentials instead, through a keyed hash of them
// (Record.CredentialTag): a call with other credentials may not settle,
// replay or re-send it.
//
// An operation also keeps its representation headers (Content-Type,
// Content-Encoding): the same bytes under another content type are another
// request (ErrKeyReuse).

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
// "" declares none. Where Options.Identity is set too, the two must agree;
// see Options.Identity.
//
// Resume puts the operation's declared identity on the context of the
// request it rebuilds, so that Options.PrepareResume can read it with
// IdentityFrom and add that identity's credentials.
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
	req      *http.Request
	identity string // declared; "" if none
	tag      string // the credential tag, once made (credentialTag)
	// contentType and contentEncoding are representation's.
	contentType, contentEncoding string
}

// bindingOf reads a journaled request's binding, before anything is written
// or sent. It fails with ErrInvalidRequest for an invalid identity, or one
// WithIdentity and Options.Identity disagree on, and with Options.Identity's
// own error.
// It returns the binding by value: the call keeps it on its stack.
func (t *Transport) bindingOf(req *http.Request) (binding, error) {
	id, err := t.declaredIdentity(req)
	if err != nil {
		return binding{}, err
	}
	b := binding{req: req, identity: id}
	b.contentType, b.contentEncoding = t.representation(req.Header)
	return b, nil
}

// declaredIdentity is WithIdentity's identity or Options.Identity's,
// whichever is not empty. Neither wins when both are set and differ: that is
// ErrInvalidRequest.
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

// isCredential reports whether id is one of the credentials req carries: a
// sensitive header's value, or its part after the scheme ("Bearer x"), the
// URL's password, or a sensitive query parameter's value. Journaled as an
// identity, it would put the credential on disk.
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

// bind writes b into rec, a new record: the declared identity, or else the
// tag of the credentials; and the representation headers.
func (t *Transport) bind(rec *Record, b *binding) {
	if b.identity != "" {
		rec.Identity = b.identity
	} else {
		rec.CredentialTag = t.credentialTag(b)
	}
	rec.ContentType, rec.ContentEncoding = b.contentType, b.contentEncoding
}

// admit checks that a call bound by b may run rec, an operation already in
// the journal that it names by name (its lock name): under the identity rec
// was created under (else ErrIdentityMismatch), and with the same
// representation headers (else ErrKeyReuse). The identity comes first, so
// that another identity learns nothing of rec's request, and the error names
// only what the call itself gave.
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
// written before identities were bound has neither, and is anyone's, as it
// was then.
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
		b.tag = t.tags.tag(t.credentials(b.req))
	}
	return b.tag
}

// credentials encodes the credentials req carries, unambiguously (each
// string length-prefixed) and in a fixed order: the sensitive headers by
// name (Options.SensitiveHeaders and DefaultSensitiveHeaders()), each with its
// values sorted; the URL's userinfo; the sensitive query parameters
// (Options.SensitiveQueryParams), sorted. A request without any encodes
// as empty, which is a credential set too: a call with credentials is not
// the same identity as one without.
func (t *Transport) credentials(req *http.Request) []byte {
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, name := range t.droppedHeaders(req.Header) { // sorted
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

// parsedMediaType is mediaType through mime.ParseMediaType and
// mime.FormatMediaType.
func parsedMediaType(v string) string {
	if mt, params, err := mime.ParseMediaType(v); err == nil {
		if s := mime.FormatMediaType(mt, params); s != "" {
			return s
		}
	}
	return strings.TrimSpace(v)
}

// recordRepresentation returns the representation headers rec was created
// with, and whether they are known. A record written before they were kept
// has them only in its Header, which a settled one no longer has: any
// representation matches that one, as it did when it was written.
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

// resumeContext is ctx for the request Resume rebuilds for rec: it declares
// rec's identity, or none (whatever ctx declared), for PrepareResume to read.
func resumeContext(ctx context.Context, rec *Record) context.Context {
	if id, _ := IdentityFrom(ctx); id == rec.Identity {
		return ctx
	}
	return WithIdentity(ctx, rec.Identity)
}

// checkResumed refuses to send the request PrepareResume prepared for rec
// when Options.Identity maps it to another identity than the one rec was
// created under: PrepareResume added another tenant's credentials. Where it
// cannot tell (no Options.Identity, no identity declared for rec, or
// Options.Identity returns ""), Resume trusts PrepareResume: a credential
// tag is not checked, since a token refreshed after a restart would then
// never be resumed.
func (t *Transport) checkResumed(req *http.Request, rec *Record) error {
	if t.cfg.Identity == nil || rec.Identity == "" {
		return nil
	}
	id, err := t.cfg.Identity(req)
	if err != nil {
		return fmt.Errorf("idem: Options.Identity: %w", err)
	}
	if id != "" && id != rec.Identity {
		return fmt.Errorf("%w: operation %q (key %s): Options.Identity maps the request PrepareResume prepared to another identity; nothing was sent",
			ErrIdentityMismatch, rec.OperationID, rec.Key)
	}
	return nil
}

// credentialTagContext separates credential tags from any other use of the
// key, and names the encoding of credentials, should it ever change.
const credentialTagContext = "idem credential tag v1\x00"

// tagger makes credential tags under one identity key. It is safe for
// concurrent use.
type tagger struct {
	key    []byte
	hashes sync.Pool // of *tagHash under key
	// none is the tag of the empty credential set, what most calls carry:
	// made once.
	none func() string
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

// tagHash is an HMAC-SHA-256 under the identity key, kept between tags:
// hmac.New costs five allocations a call. The key never changes, so every
// pooled hash is keyed alike.
type tagHash struct {
	mac hash.Hash
	sum [sha256.Size]byte
}

// credentialTagPrefix is credentialTagContext as the bytes hashed first.
var credentialTagPrefix = []byte(credentialTagContext)
