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

	"github.com/idem-go/idem/journal"
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

// diskRecord is storedRecord as encoding/json reads and writes it: idem's
// JSON form of a record, then its sealed part as the field "sealed". It is
// what unmarshalStored falls back to for metadata parseStored does not take
// (record_parse.go).
type diskRecord struct {
	journal.RecordJSON
	Box []byte `json:"sealed,omitempty"`
}

// MarshalJSON writes s through encoding/json, as diskRecord.
func (s storedRecord) MarshalJSON() ([]byte, error) {
	return json.Marshal(diskRecord{RecordJSON: journal.JSONOf(s.Record), Box: s.Box})
}

// UnmarshalJSON reads s through encoding/json, as diskRecord.
func (s *storedRecord) UnmarshalJSON(b []byte) error {
	var d diskRecord
	if err := json.Unmarshal(b, &d); err != nil {
		return err
	}
	s.Record, s.Box = d.Record(), d.Box
	return nil
}
