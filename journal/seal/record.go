// This file holds the rule of what a Store seals of a journal.Record, for
// every Store that seals (boltjournal, pgjournal). When a record names a key
// ID (Record.EncryptionKeyID), what it holds of the request itself —
// headers, the URL's query, the body's SHA-256, the body, the query of a
// 307 or 308's Location, and the operation's identity binding and
// representation headers — is sealed; what Resume and listings need to
// schedule and name it (key, operation ID, method, scheme, host and path,
// state, times, attempts, status, last error, key ID) stays readable. Each
// sealed string is bound to the record it belongs to (additionalData).

package seal

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/idem-go/idem/journal"
)

// sealedPart is what a record's request part holds once opened. Its JSON
// form is what Stores have written: its names stay.
type sealedPart struct {
	Header     http.Header `json:"header,omitempty"`
	URLRest    string      `json:"url_rest,omitempty"` // the URL from its '?' on (from a '#' in bbolt journals written before fragments were left out)
	BodySHA256 string      `json:"sha256"`
	// BodySegment is the size of the parts a body staged ahead of its
	// record is sealed in (SealSegment); 0 for a body sealed whole.
	BodySegment int `json:"body_segment,omitempty"`
	// LocationRest is Record.Location from its '?' on.
	LocationRest string `json:"location_rest,omitempty"`
	// The operation's binding and representation: sealed too, so that the
	// storage shows neither tenant names nor which records share one, nor
	// a credential tag to test guesses against.
	Identity        string `json:"identity,omitempty"`
	CredentialTag   string `json:"cred,omitempty"`
	ContentType     string `json:"content_type,omitempty"`
	ContentEncoding string `json:"content_encoding,omitempty"`
}

// maxSegment bounds the part size a sealed record may name: a Store
// writes far less (boltjournal: 1 MiB).
const maxSegment = 1 << 30

// SplitURL cuts a journaled URL before its query or fragment: the part a
// sealed record leaves readable, and the part it seals.
func SplitURL(u string) (plain, rest string) {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i], u[i:]
	}
	return u, ""
}

// HoldsRequest reports whether rec holds in the clear any field that a
// sealed record keeps in its sealed part. A Store refuses a stored record
// that names a key ID and holds one (as damaged: journal.ErrCorrupt):
// idem never writes one, and those fields would be used unauthenticated.
func HoldsRequest(rec *journal.Record) bool {
	return len(rec.Header) > 0 || rec.BodySHA256 != "" || strings.ContainsAny(rec.URL+rec.Location, "?#") ||
		rec.Identity != "" || rec.CredentialTag != "" || rec.ContentType != "" || rec.ContentEncoding != ""
}

// SealRequest seals what rec holds of its request under rec.EncryptionKeyID,
// bound to rec, and returns what a Store keeps in the clear: plain, a copy
// of rec without those fields (its URL and Location cut before their
// query), and box, the sealed fields, which the Store keeps beside plain
// and hands back to OpenRequest. segment, the size of the parts the body is
// sealed in (SealSegment; 0: sealed whole, SealBody), is sealed with them.
// The Body is neither sealed nor removed here: SealBody and SealSegment
// seal it. An unknown key ID gives an error matching
// journal.ErrUnknownEncryptionKey.
func (r *Ring) SealRequest(rec *journal.Record, segment int) (plain journal.Record, box []byte, err error) {
	urlPlain, urlRest := SplitURL(rec.URL)
	locPlain, locRest := SplitURL(rec.Location)
	secret, err := json.Marshal(sealedPart{Header: rec.Header, URLRest: urlRest, BodySHA256: rec.BodySHA256,
		BodySegment: segment, LocationRest: locRest, Identity: rec.Identity, CredentialTag: rec.CredentialTag,
		ContentType: rec.ContentType, ContentEncoding: rec.ContentEncoding})
	if err != nil {
		return journal.Record{}, nil, err
	}
	box, err = r.sealTo(nil, rec.EncryptionKeyID, secret, additionalData("meta", rec))
	if err != nil {
		return journal.Record{}, nil, err
	}
	plain = *rec
	plain.URL, plain.Header, plain.BodySHA256, plain.Location = urlPlain, nil, "", locPlain
	plain.Identity, plain.CredentialTag, plain.ContentType, plain.ContentEncoding = "", "", "", ""
	return plain, box, nil
}

// OpenRequest opens box, the sealed part SealRequest returned for rec, and
// puts its fields back into rec: rec is the record as stored in the clear
// (HoldsRequest false), under the key ID it names. It returns the body's
// segment size sealed with them. A wrong key, an altered byte, or a box
// moved from another record gives an error matching journal.ErrDecrypt; a
// key ID the Ring lacks, journal.ErrUnknownEncryptionKey. rec is left as
// it was on an error.
func (r *Ring) OpenRequest(rec *journal.Record, box []byte) (segment int, err error) {
	secret, err := r.openTo(nil, rec.EncryptionKeyID, box, additionalData("meta", rec))
	if err != nil {
		return 0, err
	}
	var p sealedPart
	if err := json.Unmarshal(secret, &p); err != nil {
		return 0, fmt.Errorf("%w: sealed part under key %q: %w", journal.ErrDecrypt, rec.EncryptionKeyID, err)
	}
	if p.URLRest != "" && p.URLRest[0] != '?' && p.URLRest[0] != '#' {
		return 0, fmt.Errorf("%w: sealed part under key %q: URL rest %q", journal.ErrDecrypt, rec.EncryptionKeyID, p.URLRest)
	}
	if p.LocationRest != "" && (rec.Location == "" || p.LocationRest[0] != '?') {
		return 0, fmt.Errorf("%w: sealed part under key %q: Location rest %q", journal.ErrDecrypt, rec.EncryptionKeyID, p.LocationRest)
	}
	if p.BodySegment < 0 || p.BodySegment > maxSegment {
		return 0, fmt.Errorf("%w: sealed part under key %q: body segment %d", journal.ErrDecrypt, rec.EncryptionKeyID, p.BodySegment)
	}
	rec.URL += p.URLRest
	rec.Location += p.LocationRest
	rec.Header, rec.BodySHA256 = p.Header, p.BodySHA256
	rec.Identity, rec.CredentialTag, rec.ContentType, rec.ContentEncoding = p.Identity, p.CredentialTag, p.ContentType, p.ContentEncoding
	return p.BodySegment, nil
}

// SealBody returns rec's Body sealed whole under rec.EncryptionKeyID,
// bound to rec. An empty body is returned as it is: there is nothing to
// seal, and OpenBody gives it back as nil.
func (r *Ring) SealBody(rec *journal.Record) ([]byte, error) {
	if len(rec.Body) == 0 {
		return rec.Body, nil
	}
	return r.sealTo(nil, rec.EncryptionKeyID, rec.Body, additionalData("body", rec))
}

// OpenBody returns the body stored as sealed for rec, a record whose
// request part is open (OpenRequest): sealed whole (SealBody) if segment
// is 0, else in parts of segment bytes (SealSegment); nil for an empty
// one. Errors as OpenRequest's.
func (r *Ring) OpenBody(rec *journal.Record, segment int, stored []byte) ([]byte, error) {
	switch {
	case len(stored) == 0:
		return nil, nil
	case segment > 0:
		return r.openSegments(rec, segment, stored)
	}
	return r.openTo(nil, rec.EncryptionKeyID, stored, additionalData("body", rec))
}

// A body staged ahead of its record may be sealed in parts, each on its own
// and bound to its place, rather than whole: sealed whole, an 8 MiB body's
// ciphertext is a second full copy in memory until written. Each part's
// additional data names it ("body-segment"), its number and whether it is
// the last, so parts cannot be reordered, dropped or moved to another
// record without failing to open.

// SealSegment appends part i of rec's body, sealed under
// rec.EncryptionKeyID, to dst, which must not overlap part; last says it
// is the body's last part. Every part but the last holds the segment size
// sealed in rec's request part; the stored body is the parts one after the
// other.
func (r *Ring) SealSegment(dst []byte, rec *journal.Record, i int, part []byte, last bool) ([]byte, error) {
	return r.sealTo(dst, rec.EncryptionKeyID, part, segmentData(rec, i, last))
}

// segmentData is the additional data of part i of rec's body.
func segmentData(rec *journal.Record, i int, last bool) []byte {
	ad := binary.AppendUvarint(additionalData("body-segment", rec), uint64(i))
	if last {
		return append(ad, 1)
	}
	return append(ad, 0)
}

// openSegments opens a body sealed in parts of segment bytes.
func (r *Ring) openSegments(rec *journal.Record, segment int, stored []byte) ([]byte, error) {
	a, err := r.aead(rec.EncryptionKeyID)
	if err != nil {
		return nil, err
	}
	box := segment + 1 + a.Overhead() // a full part as sealTo writes it
	n := (len(stored) + box - 1) / box
	body := make([]byte, 0, max(len(stored)-n*(1+a.Overhead()), 0))
	for i := 0; len(stored) > 0; i++ {
		part := stored[:min(len(stored), box)]
		stored = stored[len(part):]
		if body, err = r.openTo(body, rec.EncryptionKeyID, part, segmentData(rec, i, len(stored) == 0)); err != nil {
			return nil, fmt.Errorf("body part %d: %w", i, err)
		}
	}
	return body, nil
}

// additionalData binds a sealed string to one part of one record: the
// fields that say where and as what its request is sent, the URL without
// its query. A body moved to another record (another idempotency key,
// method, host or path) no longer opens, so altered storage cannot make
// idem send one operation's sealed bytes under another's key.
func additionalData(part string, r *journal.Record) []byte {
	plainURL, _ := SplitURL(r.URL)
	b := []byte("idem-record\x00")
	for _, s := range []string{part, r.EncryptionKeyID, r.Key, r.OperationID, r.Method, plainURL, r.Host} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}
