// This file makes the Journal a journal.Store: Create, Get, Reload, Update,
// Flush, Pending, PendingCount and Prune. The leases are in lease.go.

package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5"
)

var _ journal.Store = (*Journal)(nil)

// ErrFenced is returned by a synchronous Update when another instance has
// taken over the operation since this one read it (its lease ran out and
// the row's epoch moved on), or leases it: the write changes nothing, and
// the other instance's outcome stands. A deferred settle so refused is
// counted in Stats.FencedSettles instead.
var ErrFenced = errors.New("pgjournal: operation taken over by another instance (lease lost)")

// Create writes rec, a new pending operation, and leases it to this
// Journal (journal.Store). With Options.Encryption it is sealed under the
// Current key, which rec.EncryptionKeyID then names; without it, in a
// namespace once opened with it, it is refused (journal.ErrInvalidOptions).
// The Creates of the moment share one INSERT and one commit (create.go);
// ctx is not watched once rec is queued.
func (j *Journal) Create(_ context.Context, rec *journal.Record) error {
	if err := j.check(); err != nil {
		return err
	}
	if j.sealedNS.Load() {
		return j.errNeedsKeyring()
	}
	if rec.BodySHA256 == "" {
		rec.BodySHA256 = journal.BodySum(rec.Body)
	}
	rec.EncryptionKeyID = j.ring.Current()
	p := pendingCreate{rec: rec}
	var err error
	if p.data, p.sealed, err = encode(j.ring, rec); err != nil {
		return err
	}
	if p.body, err = sealBody(j.ring, rec); err != nil {
		return err
	}
	if err := j.create(p); err != nil {
		if err == journal.ErrNameTaken {
			return fmt.Errorf("%w: %s is already in the journal", journal.ErrNameTaken, journal.NameOf(rec))
		}
		return err
	}
	return nil
}

// bodyOf is the body column of rec: none once settled.
func bodyOf(rec *journal.Record) []byte {
	if rec.State == journal.StateSettled {
		return nil
	}
	if rec.Body == nil {
		return []byte{}
	}
	return rec.Body
}

// Get returns the operation name names, with its body, or nil
// (journal.Store). A key idem minted is not found.
func (j *Journal) Get(ctx context.Context, name journal.Name) (*journal.Record, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	q := `SELECT ` + columns + `, body FROM {s}.operations WHERE namespace = $1 AND operation_id = $2`
	arg := name.OperationID
	if name.OperationID == "" {
		q = `SELECT ` + columns + `, body FROM {s}.operations WHERE namespace = $1 AND key = $2 AND caller_key`
		arg = name.Key
	}
	if err := j.writeQueuedFor(ctx, name); err != nil { // its settle, if queued, first
		return nil, err
	}
	var rec *journal.Record
	var err error
	if name.OperationID != "" {
		rec, err = j.lookup(ctx, name.OperationID) // shares one SELECT with the look-ups of the moment
	} else {
		rec, err = j.readOne(ctx, "get", j.pool.QueryRow(ctx, j.sql(q), j.opts.Namespace, arg))
	}
	if err != nil || rec == nil || journal.NameOf(rec) != name || !j.claimedWithoutRow(name) {
		return rec, err
	}
	// This process claimed name while it had no row, and another instance
	// wrote the row since (its Create raced this one's Claim): take the
	// row's lease as Claim would have, waiting while that instance sends
	// it, and read it again, so that the two never send it at once.
	if err := j.awaitLease(ctx, name); err != nil {
		return nil, err
	}
	return j.readOne(ctx, "get", j.pool.QueryRow(ctx, j.sql(q), j.opts.Namespace, arg))
}

// claimedWithoutRow reports whether this process claimed name while it
// had no row, and has not leased one for it since.
func (j *Journal) claimedWithoutRow(name journal.Name) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.noRow[name]
	return ok
}

// Reload returns the newest state of rec, with its body, or nil
// (journal.Store). Of a name claimed in this process only (Claim), it
// takes the row's lease first, as Get does.
func (j *Journal) Reload(ctx context.Context, rec *journal.Record) (*journal.Record, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	name := journal.NameOf(rec)
	if err := j.writeQueuedFor(ctx, name); err != nil { // its settle, if queued, first
		return nil, err
	}
	if j.claimedWithoutRow(name) {
		// Claimed here without its row's lease (Claim): take it before
		// the row is read to be sent.
		if err := j.awaitLease(ctx, name); err != nil {
			return nil, err
		}
	}
	row := j.pool.QueryRow(ctx, j.sql(`SELECT `+columns+`, body FROM {s}.operations
		WHERE namespace = $1 AND seq = $2`), j.opts.Namespace, int64(journal.RefOf(rec).Seq))
	return j.readOne(ctx, "reload", row)
}

// readOne reads a record with its body. A sealed record it cannot open is
// an error (journal.ErrUnknownEncryptionKey, journal.ErrDecrypt): whoever
// asks for one record means to use it.
func (j *Journal) readOne(_ context.Context, what string, row pgx.Row) (*journal.Record, error) {
	rec, sealErr, err := scanRecord(row, true, j.ring)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, j.fail(what, err)
	case sealErr != nil:
		return nil, fmt.Errorf("pgjournal: %s %s/%s: record %d (operation %q): %w",
			what, j.opts.Schema, j.opts.Namespace, journal.RefOf(rec).Seq, rec.OperationID, sealErr)
	}
	return rec, j.checkBody(rec)
}

// Update writes rec's new state in one committed statement (journal.Store),
// if rec's row is still at the epoch rec was read with and no other live
// instance leases it: else ErrFenced, or journal.ErrGone if the row was
// pruned. (A row another instance created between this one's Claim, which
// found none, and its Get is at the epoch Get read, yet the other's.) A
// Deferred Update to a final state (a settle) is queued and returns nil at
// once: it rides the next write-ahead's commit, or is written within
// settleDelay, under the same conditions; one they refuse changes nothing
// and is counted in Stats.FencedSettles. Until it is written this Journal
// keeps the row's lease, and its own reads see the settle. A sealed record
// is sealed again under its own key ID, its body left as stored; one
// listed Sealed (its key is not in the Keyring) changes only in what stays
// readable, and only while pending (journal.ErrGone otherwise; a queued
// settle of one no longer pending changes nothing).
func (j *Journal) Update(ctx context.Context, rec *journal.Record, d journal.Durability) error {
	if err := j.check(); err != nil {
		return err
	}
	data, box, err := encode(j.ring, rec)
	if err != nil {
		return err
	}
	ref := journal.RefOf(rec)
	var body any = bodyOf(rec)
	if rec.State != journal.StateSettled && rec.Body == nil || rec.EncryptionKeyID != "" {
		body = nil // keep the stored one: a listed record, without its body, or a sealed body, which never changes
	}
	if d == journal.Deferred && rec.State != journal.StatePending {
		// A final state: losing it costs one replay. It is queued, and rides
		// the next write-ahead's commit (settles.go).
		p := &pendingSettle{name: journal.NameOf(rec), key: rec.Key, seq: int64(ref.Seq), epoch: int64(ref.Part),
			state: int16(rec.State), data: data, updated: rec.Updated, box: box, sealed: rec.Sealed}
		if b, ok := body.([]byte); ok {
			p.body = b
		}
		if j.queueSettle(p) {
			return nil
		}
		// Close ran since the check above and wrote the queue: write it now.
		return j.writeSettles(ctx, &settling{batch: []*pendingSettle{p}, done: make(chan struct{})})
	}
	// A settle of the same operation still queued is written first: this
	// write is newer.
	if err := j.writeQueuedFor(ctx, journal.NameOf(rec)); err != nil {
		return err
	}
	tag, err := j.pool.Exec(ctx, j.sql(`UPDATE {s}.operations
		SET state = $3::smallint, record = $4, updated = $5,
			body = CASE WHEN $3::smallint = 2 THEN NULL ELSE coalesce($6::bytea, body) END,
			sealed = coalesce($9::bytea, sealed),
			leased_until = CASE WHEN $3::smallint = 1 THEN leased_until END
		WHERE namespace = $1 AND seq = $2 AND epoch = $7
			AND (holder = $8 OR leased_until IS NULL OR leased_until < now())
			AND (NOT $10::boolean OR state = 1)`),
		j.opts.Namespace, int64(ref.Seq), int16(rec.State), data, rec.Updated, body, int64(ref.Part), j.holder,
		box, rec.Sealed)
	changed := tag.RowsAffected() == 1
	if err == nil && changed {
		j.stats.commits.Add(1)
	}
	if err != nil {
		return j.fail("update", err)
	}
	if changed {
		if rec.State != journal.StatePending {
			j.forgetLease(journal.NameOf(rec)) // released by this write: Release has nothing to do
		}
		return nil
	}
	var epoch int64
	var state int16
	err = j.pool.QueryRow(ctx, j.sql(`SELECT epoch, state FROM {s}.operations WHERE namespace = $1 AND seq = $2`),
		j.opts.Namespace, int64(ref.Seq)).Scan(&epoch, &state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: pgjournal %s/%s: record %d", journal.ErrGone, j.opts.Schema, j.opts.Namespace, ref.Seq)
	case err != nil:
		return j.fail("update", err)
	case rec.Sealed && epoch == int64(ref.Part) && state != int16(journal.StatePending):
		return fmt.Errorf("%w: pgjournal %s/%s: sealed record %d is no longer pending", journal.ErrGone, j.opts.Schema, j.opts.Namespace, ref.Seq)
	}
	if epoch == int64(ref.Part) {
		return fmt.Errorf("%w: record %d is leased by another live instance", ErrFenced, ref.Seq)
	}
	return fmt.Errorf("%w: record %d read at epoch %d, now %d", ErrFenced, ref.Seq, ref.Part, epoch)
}

// Flush writes every settle queued before it, durably, and waits for those
// being written.
func (j *Journal) Flush(ctx context.Context) error {
	if err := j.check(); err != nil {
		return err
	}
	return j.writeQueued(ctx)
}

// pendingPage is how many pending rows Pending reads at once.
const pendingPage = 256

// Pending yields the pending operations that no other live instance
// leases, without their bodies, in seq order, a page at a time
// (journal.Store). A sealed one it cannot open is listed Sealed; Reload
// says why. One whose settle this Journal has queued is not listed: it is
// settled, only not yet written.
func (j *Journal) Pending(ctx context.Context, after uint64) iter.Seq2[*journal.Record, error] {
	pages := journal.Pages(ctx, after, pendingPage, func(after uint64) ([]*journal.Record, error) {
		if err := j.check(); err != nil {
			return nil, err
		}
		return j.pendingPage(ctx, int64(after))
	})
	return func(yield func(*journal.Record, error) bool) {
		for rec, err := range pages {
			if err == nil && j.settling(journal.NameOf(rec)) {
				continue
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

func (j *Journal) pendingPage(ctx context.Context, after int64) ([]*journal.Record, error) {
	rows, err := j.pool.Query(ctx, j.sql(`SELECT `+columns+` FROM {s}.operations
		WHERE namespace = $1 AND state = 1 AND seq > $2
			AND (leased_until IS NULL OR leased_until < now() OR holder = $3)
		ORDER BY seq LIMIT $4`), j.opts.Namespace, after, j.holder, pendingPage)
	if err != nil {
		return nil, j.fail("list pending", err)
	}
	defer rows.Close()
	var page []*journal.Record
	for rows.Next() {
		rec, _, err := scanRecord(rows, false, j.ring) // listed Sealed if it does not open; Reload says why
		if err != nil {
			return nil, j.fail("list pending", err)
		}
		page = append(page, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, j.fail("list pending", err)
	}
	return page, nil
}

// PendingCount returns how many operations of the namespace are pending.
func (j *Journal) PendingCount(ctx context.Context) (int, error) {
	if err := j.check(); err != nil {
		return 0, err
	}
	if err := j.writeQueued(ctx); err != nil {
		return 0, err
	}
	var n int
	err := j.pool.QueryRow(ctx, j.sql(`SELECT count(*) FROM {s}.operations WHERE namespace = $1 AND state = 1`),
		j.opts.Namespace).Scan(&n)
	if err != nil {
		return 0, j.fail("count pending", err)
	}
	return n, nil
}

// KeepAtLeast raises the Journal's retention to d if it is shorter: a
// Transport that assumes the server keeps keys for KeyTTL needs finished
// operations kept at least that long, or an operation ID reused after
// pruning would mint a second key while the server may still replay the
// first.
func (j *Journal) KeepAtLeast(d time.Duration) {
	for {
		cur := j.retention.Load()
		if cur >= int64(d) || j.retention.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// prune runs Prune with the Journal's retention, from the heartbeat; an
// error is tried again next time.
func (j *Journal) prune() {
	j.Prune(time.Duration(j.retention.Load()))
}

// pruneBatch is how many rows one statement of Prune deletes.
const pruneBatch = 1000

// Prune deletes the settled, failed and expired operations last updated
// more than retention ago, by the database's clock, in batches of
// pruneBatch rows, and returns how many it deleted. Pending ones are never
// deleted. Keep retention at least KeyTTL.
func (j *Journal) Prune(retention time.Duration) (int, error) {
	if err := j.check(); err != nil {
		return 0, err
	}
	ctx := context.Background()
	// Settles queued are pruned by their time too. The write is bounded: the
	// heartbeat prunes, and a settle's row held elsewhere must not stop its
	// renewals; what it could not write is pruned next time.
	wctx, cancel := context.WithTimeout(ctx, j.opts.Lease/3)
	err := j.writeQueued(wctx)
	cancel()
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		tag, err := j.pool.Exec(ctx, j.sql(`DELETE FROM {s}.operations WHERE namespace = $1 AND seq IN (
			SELECT seq FROM {s}.operations
			WHERE namespace = $1 AND state <> 1 AND updated < now() - $2::interval
			LIMIT $3)`), j.opts.Namespace, retention, pruneBatch)
		if err != nil {
			return total, j.fail("prune", err)
		}
		total += int(tag.RowsAffected())
		if tag.RowsAffected() < pruneBatch {
			return total, nil
		}
	}
}
