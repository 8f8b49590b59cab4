// This file holds the journal's one record codec: the columns a record is
// stored in, and the jsonb "record" column for the rest of it.

package pgjournal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idem-go/idem/journal"
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

// encode returns rec's jsonb column. A settled record keeps no headers.
// A NUL in LastError, an error's free text (a base RoundTripper may quote
// a server's bytes), becomes U+FFFD: jsonb refuses \u0000, and the write
// of a retry or a failure would fail with it, every time.
func encode(rec *journal.Record) ([]byte, error) {
	r := recordJSON{Method: rec.Method, URL: rec.URL, Host: rec.Host, Header: rec.Header,
		Dropped: rec.Dropped, DroppedQuery: rec.DroppedQuery, Identity: rec.Identity,
		CredentialTag: rec.CredentialTag, ContentType: rec.ContentType, ContentEncoding: rec.ContentEncoding,
		BodySHA256: rec.BodySHA256, Created: rec.Created, Attempts: rec.Attempts, LastAttempt: rec.LastAttempt,
		NextAttempt: rec.NextAttempt, Status: rec.Status, LastError: strings.ReplaceAll(rec.LastError, "\x00", "\uFFFD"),
		EncryptionKeyID: rec.EncryptionKeyID, Location: rec.Location}
	if rec.State == journal.StateSettled {
		r.Header = nil
	}
	return json.Marshal(r)
}

// columns are the columns a read selects, in scanRecord's order.
const columns = `seq, epoch, key, caller_key, operation_id, state, record, updated`

// scanRecord reads one row of columns (plus the body, if withBody).
func scanRecord(row pgx.Row, withBody bool) (*journal.Record, error) {
	var (
		seq, epoch int64
		opID       *string
		state      int16
		raw        []byte
		r          recordJSON
		rec        journal.Record
		body       []byte
	)
	dest := []any{&seq, &epoch, &rec.Key, &rec.CallerKey, &opID, &state, &raw, &rec.Updated}
	if withBody {
		dest = append(dest, &body)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%w: record %d: %v", journal.ErrCorrupt, seq, err)
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
	if withBody {
		rec.Body = body
	}
	journal.SetRef(&rec, journal.Ref{Seq: uint64(seq), Part: int(epoch)})
	return &rec, nil
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
