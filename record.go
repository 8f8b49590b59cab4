// This file holds Record, one operation as the journal stores it. Its
// encoding, sealed or not, is in record_seal.go.

package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
)

// State is where an operation is in its life.
type State uint8

const (
	// Pending: the outcome is not known yet; Resume will send it again.
	Pending State = iota + 1
	// Settled: a final response was received.
	Settled
	// Expired: pending for longer than KeyTTL; never re-sent blindly.
	Expired
	// Failed: failed permanently before the server could have acted.
	Failed
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Settled:
		return "settled"
	case Expired:
		return "expired"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", s)
}

// Record is one operation in the journal. Records returned by the Journal are
// copies; changing them changes nothing on disk.
type Record struct {
	ID          uint64      `json:"-"` // journal sequence number, in creation order (the bbolt key)
	Key         string      `json:"key"`
	OperationID string      `json:"op,omitempty"`
	Method      string      `json:"method"`
	URL         string      `json:"url"`               // without userinfo, fragment and Options.SensitiveQueryParams
	Host        string      `json:"host,omitempty"`    // the request's Host override, if any
	Header      http.Header `json:"header,omitempty"`  // without sensitive headers and the key
	Dropped     []string    `json:"dropped,omitempty"` // names (never values) of sensitive headers not written
	// DroppedQuery names (never values) the query parameters left out of URL
	// (Options.SensitiveQueryParams), sorted; Resume sends nothing until
	// PrepareResume has put them back.
	DroppedQuery []string `json:"dropped_query,omitempty"`
	CallerKey    bool     `json:"caller_key,omitempty"` // the caller chose Key (else idem minted it)
	// Identity is the identity the operation was created under, as
	// declared (Options.Identity, WithIdentity): a tenant or account name,
	// never a credential. "" if none was declared; CredentialTag then binds
	// the operation instead. See identity.go.
	Identity string `json:"identity,omitempty"`
	// CredentialTag binds an operation created with no declared identity to
	// its creator's credentials (sensitive headers, URL userinfo, sensitive
	// query parameters) without storing them: hex of HMAC-SHA-256, cut to
	// 128 bits, under a random key kept in the journal file (see
	// identity_key.go for what that protects against). Records written
	// before identities were bound (journal versions up to 7) have neither
	// field, and any identity may continue them.
	CredentialTag string `json:"cred,omitempty"`
	// ContentType and ContentEncoding are the request's representation
	// headers, normalized (media type and parameter names lowercased,
	// codings lowercased, comma-separated): part of the operation's
	// fingerprint, and kept once the record is settled and its Header
	// dropped. "" for a header the request did not carry, or named in
	// Options.SensitiveHeaders.
	ContentType     string    `json:"content_type,omitempty"`
	ContentEncoding string    `json:"content_encoding,omitempty"`
	Body            []byte    `json:"-"`       // stored in its own bucket; dropped once settled
	BodySHA256      string    `json:"sha256"`  // hex, of the body as sent
	Created         time.Time `json:"created"` // written ahead, just before the first attempt: KeyTTL counts from it
	State           State     `json:"state"`
	// Attempts counts the attempts whose outcome was recorded. Attempts cut
	// short by a crash are not counted, nor net/http's own single re-send on a
	// dead keep-alive connection (same key, same bytes).
	Attempts    int       `json:"attempts"`
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	NextAttempt time.Time `json:"next_attempt,omitzero"` // earliest time Resume may send it
	Status      int       `json:"status,omitempty"`      // last or final status code
	LastError   string    `json:"last_error,omitempty"`
	Updated     time.Time `json:"updated"` // last state change; drives pruning
	// EncryptionKeyID names the Keyring key (Options.Encryption) that the
	// record's body, headers, URL query and BodySHA256 are sealed under in
	// the file; "" if they are stored in plaintext. (It is not the
	// idempotency key: that is Key.) A record keeps its encryption key for
	// life: a rotation seals only new records under the new key.
	EncryptionKeyID string `json:"kid,omitempty"`
	// Location is where a 307 or 308 answer sent the operation (RFC 9110
	// sections 15.4.8, 15.4.9), journaled as URL is; "" until then. Attempts
	// and Resume go there; URL stays the operation's identity (redirect.go).
	Location string `json:"location,omitempty"`
	// Sealed is set on a record that Journal.Records lists without being able
	// to open its sealed part: its key ID is not in the journal's Keyring
	// (or the journal has none, as when opened read-only), or its sealed bytes
	// do not decrypt. Header, Body, BodySHA256, the URL's query, Identity,
	// CredentialTag, ContentType and ContentEncoding are then absent. Journal.Lookup returns the reason instead.
	Sealed bool `json:"-"`

	// listed is the metadata as the file held it when a listing read the
	// record (pendingAfter): reget reads only the body while they are unchanged.
	listed []byte
	// bodySegment is, for a sealed record whose body was staged, the size of
	// the parts sealed one by one (record_seal.go); 0 when the body is sealed
	// whole, or not at all.
	bodySegment int
}

// fingerprint identifies the request an operation stands for, so a reused
// operation ID with a different request is refused. url is the URL as
// journaled, without userinfo and Options.SensitiveQueryParams: a call that
// repeats an operation ID with a fresh token in such a parameter is the same
// operation. sum is the body's bodySum.
func fingerprint(method, url, sum string) string {
	return method + " " + url + " " + sum
}

// bodySum is a body's SHA-256 in hex, as Record.BodySHA256 holds it.
func bodySum(body []byte) string {
	b := sha256.Sum256(body)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}

func (r *Record) fingerprint() string {
	return fingerprint(r.Method, r.URL, r.BodySHA256)
}

// indexKeys are the index entries naming the record: its operation ID and a
// caller's key. A key idem minted is not indexed: nobody can look it up.
func (r *Record) indexKeys() [][]byte {
	var keys [][]byte
	if r.CallerKey {
		keys = append(keys, []byte("k\x00"+r.Key))
	}
	if r.OperationID != "" {
		keys = append(keys, []byte("o\x00"+r.OperationID))
	}
	return keys
}

// stored is the record as written: a settled one without headers (its body
// is dropped too).
func (r *Record) stored() *Record {
	if r.State != Settled {
		return r
	}
	c := *r
	c.Body, c.Header = nil, nil
	return &c
}

func idKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, id)
}
