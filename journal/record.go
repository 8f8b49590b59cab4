// This file holds Record, one operation as a Store keeps it, and the
// values derived from it: its fingerprint, its body's SHA-256, where it is
// sent and the latest time it was written at.

package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Record is one operation in a journal. It is a plain value: Stores return
// copies, and changing one changes nothing stored until it is passed to
// Store.Update. How a Store encodes it is the Store's business.
type Record struct {
	Key         string      // the idempotency key, on every attempt
	OperationID string      // the caller's business ID (WithOperationID); "" if none
	Method      string      // the request method
	URL         string      // without userinfo, fragment and sensitive query parameters
	Host        string      // the request's Host override, if any
	Header      http.Header // without sensitive headers and the key
	Dropped     []string    // names (never values) of sensitive headers not written
	// DroppedQuery names (never values) the query parameters left out of URL
	// (the transport's sensitive query parameters), sorted; a resume sends
	// nothing until they have been put back.
	DroppedQuery []string
	CallerKey    bool // the caller chose Key (else idem minted it)
	// Identity is the identity the operation was created under, as
	// declared: a tenant or account name, never a credential. "" if none
	// was declared; CredentialTag then binds the operation instead.
	Identity string
	// CredentialTag binds an operation created with no declared identity to
	// its creator's credentials without storing them: hex of HMAC-SHA-256,
	// cut to 128 bits, under a key the Store keeps (Store.IdentityKey).
	// Records written before identities were bound have neither field, and
	// any identity may continue them.
	CredentialTag string
	// ContentType and ContentEncoding are the request's representation
	// headers, normalized (media type and parameter names lowercased,
	// codings lowercased, comma-separated): part of the operation's
	// fingerprint, and kept once the record is settled and its Header
	// dropped. "" for a header the request did not carry, or a sensitive one.
	ContentType     string
	ContentEncoding string
	Body            []byte    // the request body; dropped once settled
	BodySHA256      string    // hex, of the body as sent
	Created         time.Time // written ahead, just before the first attempt: KeyTTL counts from it
	State           State
	// Attempts counts the attempts whose outcome was recorded. Attempts cut
	// short by a crash are not counted, nor net/http's own single re-send on a
	// dead keep-alive connection (same key, same bytes). A call records its
	// attempts when it ends, so while the outcome is unknown the server may
	// have had more (AttemptsUncertain).
	Attempts    int
	LastAttempt time.Time
	NextAttempt time.Time // earliest time a resume may send it
	Status      int       // last or final status code
	LastError   string
	Updated     time.Time // last state change; drives pruning
	// EncryptionKeyID names the key the record's body, headers, URL query
	// and BodySHA256 are sealed under in storage; "" if they are stored in
	// plaintext. (It is not the idempotency key: that is Key.) A record
	// keeps its encryption key for life.
	EncryptionKeyID string
	// Location is where a 307 or 308 answer sent the operation (RFC 9110
	// sections 15.4.8, 15.4.9), stored as URL is; "" until then. Attempts
	// and resumes go there; URL stays the operation's identity.
	Location string
	// Sealed is set on a record a listing returns without being able to
	// open its sealed part (its key is unknown, or it does not decrypt):
	// Header, Body, BodySHA256, the URL's query, Identity, CredentialTag,
	// ContentType and ContentEncoding are then absent.
	Sealed bool

	ref Ref // the Store's handle on the record (RefOf)
}

// Ref is a Store's own handle on a record it returned, carried along with
// the record and opaque to everyone else: Seq is the record's place in the
// Store's order, Meta, Part and Version whatever else the Store needs to
// find or check it again (the bytes it was read from, a size, a stamp of
// when it read them). The zero Ref is a record no Store returned.
type Ref struct {
	Seq     uint64
	Meta    []byte
	Part    int
	Version uint64
}

// RefOf returns the Store's handle on r. For Store implementations.
func RefOf(r *Record) Ref { return r.ref }

// SetRef sets the Store's handle on r. For Store implementations.
func SetRef(r *Record, ref Ref) { r.ref = ref }

// Fingerprint identifies the request an operation stands for, so that a
// reused operation ID with a different request is refused: method, URL as
// stored (without userinfo and sensitive query parameters) and the body's
// BodySum.
func Fingerprint(method, url, sum string) string {
	return method + " " + url + " " + sum
}

// Fingerprint is the fingerprint of the request r stands for.
func (r *Record) Fingerprint() string { return Fingerprint(r.Method, r.URL, r.BodySHA256) }

// BodySum is a body's SHA-256 in hex, as Record.BodySHA256 holds it.
func BodySum(body []byte) string {
	h := bodySum(body)
	return string(h[:])
}

func bodySum(body []byte) (h [2 * sha256.Size]byte) {
	b := sha256.Sum256(body)
	hex.Encode(h[:], b[:])
	return h
}

// BodyMatches reports whether r's body hashes to its BodySHA256. It
// allocates nothing: Resume checks every body before it sends it.
func (r *Record) BodyMatches() bool {
	h := bodySum(r.Body)
	return string(h[:]) == r.BodySHA256
}

// Target is the URL an operation is sent to: the Location of the last 307
// or 308, or its URL.
func (r *Record) Target() string {
	if r.Location != "" {
		return r.Location
	}
	return r.URL
}

// TargetHost is the Host override an operation is sent with. net/http's
// Client keeps one through a redirect to a relative Location only; the
// record keeps it while the Location names the same host.
func (r *Record) TargetHost() string {
	if r.Host == "" || r.Location == "" {
		return r.Host
	}
	u, err1 := url.Parse(r.URL)
	l, err2 := url.Parse(r.Location)
	if err1 != nil || err2 != nil || u.Host != l.Host {
		return ""
	}
	return r.Host
}

// Written is the latest time r was written at: its creation, its last
// attempt or its last state change. NextAttempt is not one: it is meant to
// be in the future.
func (r *Record) Written() time.Time {
	w := r.Created
	if r.LastAttempt.After(w) {
		w = r.LastAttempt
	}
	if r.Updated.After(w) {
		w = r.Updated
	}
	return w
}

// AttemptsUncertain reports whether the server may have received more
// attempts of r than r.Attempts counts, with their outcome unknown: r is
// pending or expired. A call writes its attempts only when it ends (settled,
// failed, or pending again), so a call in flight, or one a crash cut short
// after its request left, is not counted: a pending record with no attempt
// may have reached the server. A Transport treats every such record as
// possibly sent; tools that show Attempts say so (idem journal ls: "0+?").
// A settled or failed record's count is final; a settled one may still
// leave out an attempt a crash cut short, but its outcome is known.
func (r *Record) AttemptsUncertain() bool {
	return r.State == StatePending || r.State == StateExpired
}

// Name names an operation in a journal: by its operation ID, or, for one
// without, by its caller-chosen idempotency key. A key idem minted cannot
// be looked up: nobody else knows it.
type Name struct {
	OperationID string
	Key         string
}

// NameOf is the name a Store finds r by: its operation ID if it has one,
// else its key.
func NameOf(r *Record) Name {
	if r.OperationID != "" {
		return Name{OperationID: r.OperationID}
	}
	return Name{Key: r.Key}
}

func (n Name) String() string {
	if n.OperationID != "" {
		return "operation " + strconv.Quote(n.OperationID)
	}
	return "key " + strconv.Quote(n.Key)
}
