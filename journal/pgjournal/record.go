// This file holds the journal's one record codec: the columns a record is
// stored in, the jsonb "record" column for the rest of it, and, for a
// record sealed under a key ID (Options.Encryption), the "sealed" column
// for its request part and its body sealed, by package seal's rule.

package pgjournal

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idem-go/idem/internal/recordjson"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/seal"
	"github.com/jackc/pgx/v5"
)

// recordJSON is the jsonb column: the JSON form of a journal.Record less
// what has a column of its own (the key, the operation ID, CallerKey, the
// state and Updated; the body too, which the JSON form leaves out). The
// fields below hide the form's fields of the same names and, left empty,
// keep them out of the column.
type recordJSON struct {
	journal.RecordJSON
	Key         json.RawMessage `json:"key,omitempty"`
	OperationID json.RawMessage `json:"op,omitempty"`
	CallerKey   json.RawMessage `json:"caller_key,omitempty"`
	State       json.RawMessage `json:"state,omitempty"`
	Updated     json.RawMessage `json:"updated,omitempty"`
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
	c.LastError = strings.ReplaceAll(c.LastError, "\x00", "\uFFFD")
	// recordjson writes what json.Marshal(recordJSON{...}) would, without
	// reflection: this runs on every write-ahead and settle.
	data, err = recordjson.Append(make([]byte, 0, 512), &c, recordjson.Column)
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
		key        string
		callerKey  bool
		opID       *string
		state      int16
		raw, box   []byte
		body       []byte
		updated    time.Time
		r          recordJSON
	)
	dest := []any{&seq, &epoch, &key, &callerKey, &opID, &state, &raw, &updated, &box}
	if withBody {
		dest = append(dest, &body)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil, fmt.Errorf("%w: record %d: %v", journal.ErrCorrupt, seq, err)
	}
	rec = r.Record()
	rec.Key, rec.CallerKey, rec.State, rec.Updated = key, callerKey, journal.State(state), updated
	if opID != nil {
		rec.OperationID = *opID
	}
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
