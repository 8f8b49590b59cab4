// This file holds the transactional outbox: a call journaled inside the
// caller's own database transaction, sent if and only if it commits.

package pgjournal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"

	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5"
)

// ErrNoOperationID is returned by the Outbox's Enqueue methods for a
// request without an operation ID (idem.WithOperationID): it is how the
// caller reads the outcome afterwards, and what makes enqueueing again
// harmless.
var ErrNoOperationID = errors.New("pgjournal: outbox call without an operation ID (idem.WithOperationID)")

// Preparer builds the record of a new operation from a request, without
// writing or sending anything: *idem.Transport is one (Transport.Prepare),
// and keeps the same rules for keys, bodies and sensitive headers as its
// RoundTrip.
type Preparer interface {
	Prepare(req *http.Request) (*journal.Record, error)
}

// Outbox journals calls inside the caller's transactions. A call enqueued
// in a transaction that commits is pending in the journal, and any
// instance's Resume sends it, exactly as it would a call whose instance
// died; one in a transaction that rolls back never existed. Run wakes a
// sender on each commit. It is safe for concurrent use.
type Outbox struct {
	j *Journal
	p Preparer
}

// NewOutbox returns the outbox of j, whose records p prepares: p is the
// Transport over j (the credential tags it writes are j's).
func NewOutbox(j *Journal, p Preparer) *Outbox { return &Outbox{j: j, p: p} }

// EnqueueTx journals req, which must carry an operation ID, as a pending
// operation inside tx, the caller's pgx transaction, and returns its
// record. Nothing is sent now: after tx commits, a Transport's Resume on
// any instance sends it (Run calls one at once). Enqueueing again an
// operation ID the journal holds with the same request (method, URL, body,
// and the caller's idempotency key, if it sets one) returns the stored
// record and adds nothing; with another request it fails with
// journal.ErrNameTaken. Other errors: ErrNoOperationID, the
// Preparer's (for idem: ErrInvalidRequest, ErrInvalidKey,
// ErrBodyTooLarge), or the database's; tx is then the caller's to roll
// back. The outcome is read afterwards with Journal.Get by the operation
// ID: its State, Status and LastError.
func (o *Outbox) EnqueueTx(ctx context.Context, tx pgx.Tx, req *http.Request) (*journal.Record, error) {
	return o.enqueue(ctx, func(q string, args ...any) pgx.Row { return tx.QueryRow(ctx, q, args...) }, req)
}

// EnqueueSQLTx is EnqueueTx for a database/sql transaction, with a
// PostgreSQL driver (pgx's stdlib, lib/pq).
func (o *Outbox) EnqueueSQLTx(ctx context.Context, tx *sql.Tx, req *http.Request) (*journal.Record, error) {
	return o.enqueue(ctx, func(q string, args ...any) pgx.Row { return tx.QueryRowContext(ctx, q, args...) }, req)
}

// queryRow runs one statement in the caller's transaction.
type queryRow func(q string, args ...any) pgx.Row

func (o *Outbox) enqueue(ctx context.Context, query queryRow, req *http.Request) (*journal.Record, error) {
	j := o.j
	if err := j.check(); err != nil {
		return nil, err
	}
	rec, err := o.p.Prepare(req)
	if err != nil {
		return nil, err
	}
	if rec.OperationID == "" {
		return nil, ErrNoOperationID
	}
	if j.sealedNS.Load() {
		return nil, j.errNeedsKeyring()
	}
	if rec.BodySHA256 == "" {
		rec.BodySHA256 = journal.BodySum(rec.Body)
	}
	rec.EncryptionKeyID = j.ring.Current()
	data, box, err := encode(j.ring, rec)
	if err != nil {
		return nil, err
	}
	body, err := sealBody(j.ring, rec)
	if err != nil {
		return nil, err
	}
	// Inserted unleased, so that any instance may send it once committed;
	// the notification is delivered on commit only. A conflict inserts
	// nothing and leaves tx usable; so does the sealed namespace's mark,
	// for a Journal without Options.Encryption (as in insert).
	var seq, epoch int64
	err = query(j.sql(`WITH ins AS (
			INSERT INTO {s}.operations (namespace, key, caller_key, operation_id, state, record, body, sealed, updated)
			SELECT $1, $2::text, $3::boolean, $4::text, $5::smallint, $6::text::jsonb, $7::bytea, $8::bytea, $9::timestamptz
			WHERE $11 OR NOT EXISTS (SELECT FROM {s}.namespaces WHERE namespace = $1 AND sealed)
			ON CONFLICT DO NOTHING
			RETURNING seq, epoch)
		SELECT seq, epoch FROM ins CROSS JOIN LATERAL pg_notify($10, '')`),
		j.opts.Namespace, rec.Key, rec.CallerKey, rec.OperationID, int16(rec.State), string(data), body, box,
		rec.Updated, j.channel(), j.ring != nil).Scan(&seq, &epoch)
	if err == nil {
		journal.SetRef(rec, journal.Ref{Seq: uint64(seq), Part: int(epoch)})
		return rec, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, sql.ErrNoRows) {
		return nil, j.fail("enqueue", err)
	}
	stored, sealErr, err := scanRecord(query(j.sql(`SELECT `+columns+`, body FROM {s}.operations
		WHERE namespace = $1 AND (operation_id = $2 OR key = $3 AND caller_key AND $4)`),
		j.opts.Namespace, rec.OperationID, rec.Key, rec.CallerKey), true, j.ring)
	switch {
	case (errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows)) && j.ring == nil && o.markedSealed(query):
		return nil, j.errNeedsKeyring() // no row conflicted: the namespace's mark refused it
	case err != nil:
		return nil, j.fail("enqueue", err)
	case sealErr != nil:
		return nil, fmt.Errorf("pgjournal: enqueue %s/%s: %s is already in the journal, sealed: %w",
			j.opts.Schema, j.opts.Namespace, journal.NameOf(rec), sealErr)
	}
	// The caller's key is part of the request, as for a call (idem's
	// ErrKeyReuse): the stored operation is sent under its own key.
	if stored.OperationID != rec.OperationID || stored.Fingerprint() != rec.Fingerprint() ||
		rec.CallerKey && stored.Key != rec.Key {
		return nil, fmt.Errorf("%w: %s is already in the journal for another request", journal.ErrNameTaken, journal.NameOf(rec))
	}
	return stored, nil
}

// markedSealed is Journal.markedSealed in the caller's transaction.
func (o *Outbox) markedSealed(query queryRow) bool {
	var sealed bool
	err := query(o.j.sql(`SELECT sealed FROM {s}.namespaces WHERE namespace = $1`), o.j.opts.Namespace).Scan(&sealed)
	if err == nil && sealed {
		o.j.sealedNS.Store(true)
	}
	return err == nil && sealed
}

// channel is the namespace's NOTIFY channel: a hash, as a channel name is
// at most 63 bytes.
func (j *Journal) channel() string {
	h := fnv.New64a()
	h.Write([]byte(j.opts.Schema + "\x00" + j.opts.Namespace))
	return fmt.Sprintf("idem_%016x", h.Sum64())
}
