// This file holds how a Record is stored (journal.go holds the layout): its
// metadata (record_binary.go), its body apart. When the record names a key ID
// (Options.Encryption), its request part is sealed by package seal's rule
// (which fields, under which key, bound to which record), and kept in the
// metadata's sealed part; its body is sealed on its own.

package boltjournal

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idem-go/idem/journal/seal"
)

// storedRecord is a record's metadata as written. A sealed record (EncryptionKeyID
// set) keeps its request part in Box (seal.Ring.SealRequest), and leaves
// those fields of the Record empty.
type storedRecord struct {
	*Record
	Box []byte `json:"sealed,omitempty"`
}

// errStored marks stored bytes that no version of idem writes.
var errStored = errors.New("malformed record")

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
	c, box, err := k.ring().SealRequest(r, bodySegment(r))
	if err != nil {
		return nil, err
	}
	return appendBinary(&c, make([]byte, 0, 256+len(box)+room), box)
}

// encodeBody returns r's body as stored: itself, not copied, or sealed under
// r.EncryptionKeyID. An empty body is not stored. (A body of stageMin bytes
// or more is staged instead, and sealed in parts as it is: sealSegment.)
func (k *keyring) encodeBody(r *Record) ([]byte, error) {
	if r.EncryptionKeyID == "" {
		return r.Body, nil
	}
	return k.ring().SealBody(r)
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
	if len(s.Box) == 0 || seal.HoldsRequest(rec) {
		return nil, nil, fmt.Errorf("%w: sealed record with its request in plaintext, or without its sealed part", errStored)
	}
	rec.Header = nil
	segment, err := k.ring().OpenRequest(rec, s.Box)
	if err != nil {
		rec.Sealed = true
		return rec, err, nil
	}
	setBodySegment(rec, segment)
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
	b, err := k.ring().OpenBody(rec, bodySegment(rec), body)
	if err != nil {
		rec.Sealed = true
		return err
	}
	rec.Body = b
	return nil
}

// sealSegment appends part i of rec's body, sealed in parts of
// bodySegment(rec) bytes (seal.Ring.SealSegment), to dst.
func (k *keyring) sealSegment(dst []byte, rec *Record, i int, part []byte, last bool) ([]byte, error) {
	return k.ring().SealSegment(dst, rec, i, part, last)
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
