// This file holds how a Record is stored (journal.go holds the layout): its
// metadata (record_binary.go), its body apart. When the record names a key ID
// (Options.Encryption, encrypt.go), what it holds of the request itself —
// headers, the URL's query, the body's SHA-256, the body, and the
// operation's identity binding and representation headers — is sealed; what Resume and listings need to schedule and name it (key,
// operation ID, method, scheme, host and path, state, times) stays readable.

package boltjournal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idem-go/idem/journal"
)

// storedRecord is a record's metadata as written. A sealed record (EncryptionKeyID
// set) keeps its headers, the rest of its URL and its body hash in Box, and
// leaves those fields of the Record empty.
type storedRecord struct {
	*Record
	Box []byte `json:"sealed,omitempty"`
}

// sealedPart is what a Box holds once opened.
type sealedPart struct {
	Header     http.Header `json:"header,omitempty"`
	URLRest    string      `json:"url_rest,omitempty"` // the URL from its '?' on (from a '#' in journals written before fragments were left out)
	BodySHA256 string      `json:"sha256"`
	// BodySegment is Record.bodySegment: a staged body is sealed in parts
	// of this many bytes, each on its own (sealSegment).
	BodySegment int `json:"body_segment,omitempty"`
	// LocationRest is Record.Location from its '?' on.
	LocationRest string `json:"location_rest,omitempty"`
	// The operation's binding and representation (identity.go): sealed
	// too, so that the file shows neither tenant names nor which records
	// share one, nor a credential tag to test guesses against.
	Identity        string `json:"identity,omitempty"`
	CredentialTag   string `json:"cred,omitempty"`
	ContentType     string `json:"content_type,omitempty"`
	ContentEncoding string `json:"content_encoding,omitempty"`
}

// errStored marks stored bytes that no version of idem writes.
var errStored = errors.New("malformed record")

// splitURL cuts a journaled URL before its query or fragment: the part a
// sealed record leaves readable, and the part it seals.
func splitURL(u string) (plain, rest string) {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i], u[i:]
	}
	return u, ""
}

// encodeMeta returns r's metadata as stored (record_binary.go), its
// request part sealed under r.EncryptionKeyID when that is set.
func (k *keyring) encodeMeta(r *Record) ([]byte, error) { return k.encodeMetaRoom(r, 0) }

// encodeMetaInto is encodeMeta into buf's memory, when unsealed metadata
// fits there.
func (k *keyring) encodeMetaInto(r *Record, buf []byte) ([]byte, error) {
	if r.EncryptionKeyID == "" {
		return appendBinary(r, buf[:0], nil)
	}
	return k.encodeMeta(r)
}

// encodeMetaRoom is encodeMeta with room for room more bytes after the
// metadata (an inline body: inline.go) without copying it again.
func (k *keyring) encodeMetaRoom(r *Record, room int) ([]byte, error) {
	if r.EncryptionKeyID == "" {
		return appendBinary(r, make([]byte, 0, 256+room), nil)
	}
	plain, rest := splitURL(r.URL)
	locPlain, locRest := splitURL(r.Location)
	secret, err := json.Marshal(sealedPart{Header: r.Header, URLRest: rest, BodySHA256: r.BodySHA256,
		BodySegment: bodySegment(r), LocationRest: locRest, Identity: r.Identity, CredentialTag: r.CredentialTag,
		ContentType: r.ContentType, ContentEncoding: r.ContentEncoding})
	if err != nil {
		return nil, err
	}
	box, err := k.seal(r.EncryptionKeyID, secret, additionalData("meta", r, plain))
	if err != nil {
		return nil, err
	}
	c := *r
	c.URL, c.Header, c.BodySHA256, c.Location = plain, nil, "", locPlain
	c.Identity, c.CredentialTag, c.ContentType, c.ContentEncoding = "", "", "", ""
	return appendBinary(&c, make([]byte, 0, 256+len(box)+room), box)
}

// encodeBody returns r's body as stored: itself, not copied, or sealed under
// r.EncryptionKeyID. An empty body is not stored. (A body of stageMin bytes
// or more is staged instead, and sealed in parts as it is: sealSegment.)
func (k *keyring) encodeBody(r *Record) ([]byte, error) {
	if r.EncryptionKeyID == "" || len(r.Body) == 0 {
		return r.Body, nil
	}
	plain, _ := splitURL(r.URL)
	return k.seal(r.EncryptionKeyID, r.Body, additionalData("body", r, plain))
}

// decodePlain reads what a stored record keeps readable (state, times, key,
// operation ID, method, the URL without its query), leaving a sealed part
// closed: the journal's own bookkeeping needs no more, and does no
// cryptography inside a write transaction.
func decodePlain(meta []byte) (*Record, error) {
	s, err := unmarshalStored(meta)
	if err != nil {
		return nil, err
	}
	// Left closed, its request part is missing: say so, should it travel.
	s.Record.Sealed = s.Record.EncryptionKeyID != ""
	return s.Record, nil
}

// decodeStored reads a record from its stored metadata and body (nil for
// none, or not wanted), the inverse of encodeMeta and encodeBody. A plaintext
// record keeps body as its Body: it must not be a transaction's memory. err says
// the bytes are not a record. sealErr (journal.ErrUnknownEncryptionKey or journal.ErrDecrypt) says
// the record is one, but its sealed part stays closed: rec is then Sealed,
// without that part and without its body.
func (k *keyring) decodeStored(meta, body []byte) (rec *Record, sealErr, err error) {
	s, err := unmarshalStored(meta)
	if err != nil {
		return nil, nil, err
	}
	rec = s.Record
	if rec.EncryptionKeyID == "" {
		if len(s.Box) > 0 {
			return nil, nil, fmt.Errorf("%w: sealed part without a key ID", errStored)
		}
		return rec, k.openBody(rec, body), nil
	}
	// Fields that a sealed record keeps in its box must be empty outside it:
	// anything there was not written by idem, and is not authenticated.
	if len(s.Box) == 0 || len(rec.Header) > 0 || rec.BodySHA256 != "" || strings.ContainsAny(rec.URL+rec.Location, "?#") ||
		rec.Identity != "" || rec.CredentialTag != "" || rec.ContentType != "" || rec.ContentEncoding != "" {
		return nil, nil, fmt.Errorf("%w: sealed record with its request in plaintext, or without its sealed part", errStored)
	}
	rec.Header = nil
	if err := k.openMeta(rec, s.Box); err != nil {
		rec.Sealed = true
		return rec, err, nil
	}
	return rec, k.openBody(rec, body), nil
}

// openBody sets the Body of rec, a record whose metadata is decoded (and
// opened), from body as stored: itself for a plaintext record, which must
// not be a transaction's memory. A sealed body that does not open leaves rec
// Sealed and returns why.
func (k *keyring) openBody(rec *Record, body []byte) error {
	if len(body) == 0 {
		return nil
	}
	if rec.EncryptionKeyID == "" {
		rec.Body = body
		return nil
	}
	var b []byte
	var err error
	if bodySegment(rec) > 0 {
		b, err = k.openSegments(rec, body)
	} else {
		plain, _ := splitURL(rec.URL) // as encodeBody bound it
		b, err = k.open(rec.EncryptionKeyID, body, additionalData("body", rec, plain))
	}
	if err != nil {
		rec.Sealed = true
		return err
	}
	rec.Body = b
	return nil
}

// openMeta puts a sealed record's box back into its fields. rec.URL is the
// readable part of the URL.
func (k *keyring) openMeta(rec *Record, box []byte) error {
	secret, err := k.open(rec.EncryptionKeyID, box, additionalData("meta", rec, rec.URL))
	if err != nil {
		return err
	}
	var p sealedPart
	if err := json.Unmarshal(secret, &p); err != nil {
		return fmt.Errorf("%w: sealed part under key %q: %w", journal.ErrDecrypt, rec.EncryptionKeyID, err)
	}
	if p.URLRest != "" && p.URLRest[0] != '?' && p.URLRest[0] != '#' {
		return fmt.Errorf("%w: sealed part under key %q: URL rest %q", journal.ErrDecrypt, rec.EncryptionKeyID, p.URLRest)
	}
	if p.LocationRest != "" && (rec.Location == "" || p.LocationRest[0] != '?') {
		return fmt.Errorf("%w: sealed part under key %q: Location rest %q", journal.ErrDecrypt, rec.EncryptionKeyID, p.LocationRest)
	}
	if p.BodySegment < 0 || p.BodySegment > 1<<30 { // idem writes stageStep
		return fmt.Errorf("%w: sealed part under key %q: body segment %d", journal.ErrDecrypt, rec.EncryptionKeyID, p.BodySegment)
	}
	rec.URL += p.URLRest
	rec.Location += p.LocationRest
	rec.Header, rec.BodySHA256 = p.Header, p.BodySHA256
	setBodySegment(rec, p.BodySegment)
	rec.Identity, rec.CredentialTag, rec.ContentType, rec.ContentEncoding = p.Identity, p.CredentialTag, p.ContentType, p.ContentEncoding
	return nil
}

// A body staged ahead of its record (stageBody) is sealed in parts of
// stageStep bytes, each on its own and bound to its place, rather than whole:
// sealed whole, an 8 MiB body's ciphertext is a second full copy in memory
// until written. Each part's additional data names it ("body-segment"), its
// number and whether it is the last, so parts cannot be reordered, dropped or
// moved to another record without failing to open.

// segmentData is the additional data of part i of rec's body.
func segmentData(rec *Record, i int, last bool) []byte {
	plain, _ := splitURL(rec.URL)
	ad := binary.AppendUvarint(additionalData("body-segment", rec, plain), uint64(i))
	if last {
		return append(ad, 1)
	}
	return append(ad, 0)
}

// sealSegment appends part i of rec's body, sealed, to dst.
func (k *keyring) sealSegment(dst []byte, rec *Record, i int, part []byte, last bool) ([]byte, error) {
	return k.sealTo(dst, rec.EncryptionKeyID, part, segmentData(rec, i, last))
}

// openSegments opens a body sealed in parts of bodySegment(rec) bytes.
func (k *keyring) openSegments(rec *Record, stored []byte) ([]byte, error) {
	a, err := k.aead(rec.EncryptionKeyID)
	if err != nil {
		return nil, err
	}
	box := bodySegment(rec) + 1 + a.Overhead() // a full part as seal writes it
	n := (len(stored) + box - 1) / box
	body := make([]byte, 0, max(len(stored)-n*(1+a.Overhead()), 0))
	for i := 0; len(stored) > 0; i++ {
		part := stored[:min(len(stored), box)]
		stored = stored[len(part):]
		if body, err = k.openTo(body, rec.EncryptionKeyID, part, segmentData(rec, i, len(stored) == 0)); err != nil {
			return nil, fmt.Errorf("body part %d: %w", i, err)
		}
	}
	return body, nil
}

// diskRecord is storedRecord as encoding/json reads and writes it, under the
// field names of idem's JSON form: what unmarshalStored falls back to for
// metadata parseStored does not take (record_parse.go).
type diskRecord struct {
	Key             string      `json:"key"`
	OperationID     string      `json:"op,omitempty"`
	Method          string      `json:"method"`
	URL             string      `json:"url"`
	Host            string      `json:"host,omitempty"`
	Header          http.Header `json:"header,omitempty"`
	Dropped         []string    `json:"dropped,omitempty"`
	DroppedQuery    []string    `json:"dropped_query,omitempty"`
	CallerKey       bool        `json:"caller_key,omitempty"`
	Identity        string      `json:"identity,omitempty"`
	CredentialTag   string      `json:"cred,omitempty"`
	ContentType     string      `json:"content_type,omitempty"`
	ContentEncoding string      `json:"content_encoding,omitempty"`
	BodySHA256      string      `json:"sha256"`
	Created         time.Time   `json:"created"`
	State           State       `json:"state"`
	Attempts        int         `json:"attempts"`
	LastAttempt     time.Time   `json:"last_attempt,omitzero"`
	NextAttempt     time.Time   `json:"next_attempt,omitzero"`
	Status          int         `json:"status,omitempty"`
	LastError       string      `json:"last_error,omitempty"`
	Updated         time.Time   `json:"updated"`
	EncryptionKeyID string      `json:"kid,omitempty"`
	Location        string      `json:"location,omitempty"`
	Box             []byte      `json:"sealed,omitempty"`
}

// MarshalJSON writes s through encoding/json, as diskRecord.
func (s storedRecord) MarshalJSON() ([]byte, error) {
	r := s.Record
	return json.Marshal(diskRecord{Key: r.Key, OperationID: r.OperationID, Method: r.Method, URL: r.URL,
		Host: r.Host, Header: r.Header, Dropped: r.Dropped, DroppedQuery: r.DroppedQuery,
		CallerKey: r.CallerKey, Identity: r.Identity, CredentialTag: r.CredentialTag,
		ContentType: r.ContentType, ContentEncoding: r.ContentEncoding, BodySHA256: r.BodySHA256,
		Created: r.Created, State: r.State, Attempts: r.Attempts, LastAttempt: r.LastAttempt,
		NextAttempt: r.NextAttempt, Status: r.Status, LastError: r.LastError, Updated: r.Updated,
		EncryptionKeyID: r.EncryptionKeyID, Location: r.Location, Box: s.Box})
}

// UnmarshalJSON reads s through encoding/json, as diskRecord.
func (s *storedRecord) UnmarshalJSON(b []byte) error {
	var d diskRecord
	if err := json.Unmarshal(b, &d); err != nil {
		return err
	}
	s.Record = &Record{Key: d.Key, OperationID: d.OperationID, Method: d.Method, URL: d.URL,
		Host: d.Host, Header: d.Header, Dropped: d.Dropped, DroppedQuery: d.DroppedQuery,
		CallerKey: d.CallerKey, Identity: d.Identity, CredentialTag: d.CredentialTag,
		ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, BodySHA256: d.BodySHA256,
		Created: d.Created, State: d.State, Attempts: d.Attempts, LastAttempt: d.LastAttempt,
		NextAttempt: d.NextAttempt, Status: d.Status, LastError: d.LastError, Updated: d.Updated,
		EncryptionKeyID: d.EncryptionKeyID, Location: d.Location}
	s.Box = d.Box
	return nil
}
