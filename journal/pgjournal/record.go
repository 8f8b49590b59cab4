// This file holds the journal's one record codec: the columns a record is
// stored in, the jsonb "record" column for the rest of it, and, for a
// record sealed under a key ID (Options.Encryption), the "sealed" column
// for its request part and its body sealed, by package seal's rule.

package pgjournal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/seal"
	"github.com/jackc/pgx/v5"
)

// recordJSON is what of a journal.Record the jsonb column holds: all but
// the key, the operation ID, the state, the body and Updated, which have
// columns of their own.
type recordJSON struct {
	Method          string      `json:"method"`
	URL             string      `json:"url"`
	Host            string      `json:"host,omitempty"`
	Header          http.Header `json:"header,omitempty"`
	Dropped         []string    `json:"dropped,omitempty"`
	DroppedQuery    []string    `json:"dropped_query,omitempty"`
	Identity        string      `json:"identity,omitempty"`
	CredentialTag   string      `json:"cred,omitempty"`
	ContentType     string      `json:"content_type,omitempty"`
	ContentEncoding string      `json:"content_encoding,omitempty"`
	BodySHA256      string      `json:"sha256"`
	Created         time.Time   `json:"created"`
	Attempts        int         `json:"attempts"`
	LastAttempt     time.Time   `json:"last_attempt,omitzero"`
	NextAttempt     time.Time   `json:"next_attempt,omitzero"`
	Status          int         `json:"status,omitempty"`
	LastError       string      `json:"last_error,omitempty"`
	EncryptionKeyID string      `json:"kid,omitempty"`
	Location        string      `json:"location,omitempty"`
}

// encode returns rec's record column and, for a record sealed under a key
// ID, its sealed column: the request part that seal.Ring.SealRequest seals
// under rec's own key ID, which the record column then leaves out. A
// settled record keeps no headers. A record listed Sealed, its request
// part closed, is written as it stands, with no sealed column: the stored
// one stays. A NUL in LastError, an error's free text (a base
// RoundTripper may quote a server's bytes), becomes U+FFFD: jsonb refuses
// \u0000, and the write of a retry or a failure would fail with it, every
// time.
func encode(ring *seal.Ring, rec *journal.Record) (data, box []byte, err error) {
	c := *rec
	if c.State == journal.StateSettled {
		c.Header = nil
	}
	switch {
	case c.Sealed && seal.HoldsRequest(&c):
		return nil, nil, fmt.Errorf("pgjournal: record %d (operation %q) is listed sealed, yet holds request fields in the clear",
			journal.RefOf(rec).Seq, rec.OperationID)
	case c.EncryptionKeyID != "" && !c.Sealed:
		if c, box, err = ring.SealRequest(&c, 0); err != nil {
			return nil, nil, err
		}
	}
	data, err = json.Marshal(recordJSON{Method: c.Method, URL: c.URL, Host: c.Host, Header: c.Header,
		Dropped: c.Dropped, DroppedQuery: c.DroppedQuery, Identity: c.Identity,
		CredentialTag: c.CredentialTag, ContentType: c.ContentType, ContentEncoding: c.ContentEncoding,
		BodySHA256: c.BodySHA256, Created: c.Created, Attempts: c.Attempts, LastAttempt: c.LastAttempt,
		NextAttempt: c.NextAttempt, Status: c.Status, LastError: strings.ReplaceAll(c.LastError, "\x00", "\uFFFD"),
		EncryptionKeyID: c.EncryptionKeyID, Location: c.Location})
	return data, box, err
}

// sealBody returns rec's body column for a new row: none once settled,
// sealed under rec's key ID if it names one (seal.Ring.SealBody).
func sealBody(ring *seal.Ring, rec *journal.Record) ([]byte, error) {
	if rec.EncryptionKeyID == "" || rec.State == journal.StateSettled {
		return bodyOf(rec), nil
	}
	b, err := ring.SealBody(rec)
	if b == nil && err == nil {
		b = []byte{} // as bodyOf: an empty body, not none
	}
	return b, err
}

// columns are the columns a read selects, in scanRecord's order.
const columns = `seq, epoch, key, caller_key, operation_id, state, record, updated, sealed`

// scanRecord reads one row of columns (plus the body, if withBody),
// opening a sealed row with ring. err says the row is not one pgjournal
// writes (journal.ErrCorrupt), or the read failed. sealErr
// (journal.ErrUnknownEncryptionKey or journal.ErrDecrypt) says the row is
// a record whose sealed part stays closed: rec is then Sealed, with only
// what stays readable of it and without its body.
func scanRecord(row pgx.Row, withBody bool, ring *seal.Ring) (rec *journal.Record, sealErr, err error) {
	var (
		seq, epoch int64
		opID       *string
		state      int16
		raw        []byte
		r          recordJSON
		box        []byte
		body       []byte
	)
	rec = &journal.Record{}
	dest := []any{&seq, &epoch, &rec.Key, &rec.CallerKey, &opID, &state, &raw, &rec.Updated, &box}
	if withBody {
		dest = append(dest, &body)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil, fmt.Errorf("%w: record %d: %v", journal.ErrCorrupt, seq, err)
	}
	if opID != nil {
		rec.OperationID = *opID
	}
	rec.State = journal.State(state)
	rec.Method, rec.URL, rec.Host, rec.Header = r.Method, r.URL, r.Host, r.Header
	rec.Dropped, rec.DroppedQuery, rec.Identity, rec.CredentialTag = r.Dropped, r.DroppedQuery, r.Identity, r.CredentialTag
	rec.ContentType, rec.ContentEncoding, rec.BodySHA256 = r.ContentType, r.ContentEncoding, r.BodySHA256
	rec.Created, rec.Attempts, rec.LastAttempt, rec.NextAttempt = r.Created, r.Attempts, r.LastAttempt, r.NextAttempt
	rec.Status, rec.LastError, rec.EncryptionKeyID, rec.Location = r.Status, r.LastError, r.EncryptionKeyID, r.Location
	journal.SetRef(rec, journal.Ref{Seq: uint64(seq), Part: int(epoch)})
	if rec.EncryptionKeyID == "" {
		if box != nil {
			return nil, nil, fmt.Errorf("%w: record %d: sealed part without a key ID", journal.ErrCorrupt, seq)
		}
		if withBody {
			rec.Body = body
		}
		return rec, nil, nil
	}
	// Fields that a sealed row keeps in its sealed part must be absent
	// outside it: anything there was not written by pgjournal, and is not
	// authenticated.
	if box == nil || seal.HoldsRequest(rec) {
		return nil, nil, fmt.Errorf("%w: record %d: sealed row with its request in the clear, or without its sealed part", journal.ErrCorrupt, seq)
	}
	opened := *rec // rec stays as stored, should the sealed part not open
	segment, err := ring.OpenRequest(&opened, box)
	if err == nil && withBody {
		opened.Body, err = ring.OpenBody(&opened, segment, body)
	}
	if err != nil {
		rec.Sealed = true
		return rec, err, nil
	}
	return &opened, nil, nil
}

// checkBody refuses a record not yet settled whose body does not hash to
// its BodySHA256: sent, it would put other bytes under the operation's key.
// An expired record without a body was discarded: it is never sent.
func (j *Journal) checkBody(rec *journal.Record) error {
	if rec.State == journal.StateSettled || rec.State == journal.StateExpired && len(rec.Body) == 0 || rec.BodyMatches() {
		return nil
	}
	return fmt.Errorf("%w: pgjournal %s/%s: record %d (operation %q): body does not match its SHA-256",
		journal.ErrCorrupt, j.opts.Schema, j.opts.Namespace, journal.RefOf(rec).Seq, rec.OperationID)
}
