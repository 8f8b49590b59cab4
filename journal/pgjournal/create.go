// This file holds the group commit of write-aheads: the Creates waiting at
// one moment go to PostgreSQL as one multi-row INSERT, one transaction and
// one WAL flush, as the bbolt journal shares one commit among them. The
// settles queued meanwhile ride the same transaction (settles.go).

package pgjournal

import (
	"context"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5"
)

// pendingCreate is one Create waiting for the next batch.
type pendingCreate struct {
	rec    *journal.Record
	data   []byte // the record column, encoded
	sealed []byte // the sealed column: rec's request part, sealed; nil for a plaintext row
	body   []byte // the body column, sealed if rec is
}

// createCall is a Create in the group of write-aheads: its outcome is
// the error Create returns.
type createCall = call[pendingCreate, error]

// createBatch bounds the rows of one INSERT.
const createBatch = 512

// create queues p and waits for the batch that writes it. The Create that
// finds no batch under way writes the first itself (group.inline). The
// batch runs under its own deadline (Lease), not the caller's context:
// once queued, a write-ahead is either committed or refused, never left in
// doubt by one caller giving up. A row a unique index refuses does not
// hold up the batch (no group key).
func (j *Journal) create(p pendingCreate) error {
	err, _ := j.creates.do(context.Background(), p)
	return err
}

// insertRows is the write-ahead INSERT, less its conflict clause: the
// rows in queue order (Pending's order), none in a namespace marked sealed
// unless $12 (this Journal seals).
const insertRows = `INSERT INTO {s}.operations
		(namespace, key, caller_key, operation_id, state, record, body, sealed, updated, holder, leased_until)
	SELECT $1, k, ck, op, st, rec::jsonb, b, sl, up, $2, now() + $3::interval
	FROM unnest($4::text[], $5::boolean[], $6::text[], $7::smallint[], $8::text[], $9::bytea[], $10::bytea[], $11::timestamptz[])
		WITH ORDINALITY AS t(k, ck, op, st, rec, b, sl, up, i)
	WHERE $12 OR NOT EXISTS (SELECT FROM {s}.namespaces WHERE namespace = $1 AND sealed)
	ORDER BY i`

// insertNamed writes a batch holding a caller's key or an operation ID: a
// row a unique index refuses is skipped, and its Create gets ErrNameTaken.
// insertMinted writes a batch of minted keys alone, which no unique index
// covers: it skips the speculative insertion ON CONFLICT costs (a WAL
// record and about 15 µs per statement); a conflict there would be an
// error for the whole batch, never a silent skip.
const (
	insertNamed  = insertRows + "\n\tON CONFLICT DO NOTHING\n\tRETURNING seq, epoch, key, coalesce(operation_id, '')"
	insertMinted = insertRows + "\n\tRETURNING seq, epoch, key, coalesce(operation_id, '')"
)

// insert writes batch in one statement and tells each Create its outcome:
// its Ref and lease, journal.ErrNameTaken for a row a unique index refused,
// or the statement's error. A Journal without Options.Encryption writes
// nothing in a namespace another instance has marked sealed since this one
// opened it: the statement checks the mark, and those Creates are refused
// as they would have been at Open (errNeedsKeyring).
func (j *Journal) insert(batch []*createCall) {
	n := len(batch)
	var (
		keys    = make([]string, n)
		caller  = make([]bool, n)
		opIDs   = make([]*string, n)
		states  = make([]int16, n)
		records = make([]string, n)
		bodies  = make([][]byte, n)
		sealed  = make([][]byte, n)
		updated = make([]time.Time, n)
	)
	named := false // a row with a unique name: a caller's key or an operation ID
	for i, c := range batch {
		p := &c.in
		r := p.rec
		keys[i], caller[i], states[i], records[i], bodies[i], sealed[i], updated[i] =
			r.Key, r.CallerKey, int16(r.State), string(p.data), p.body, p.sealed, r.Updated
		if r.OperationID != "" {
			opIDs[i] = &r.OperationID
		}
		named = named || r.CallerKey || r.OperationID != ""
	}
	q := insertMinted
	if named {
		q = insertNamed
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	args := []any{j.opts.Namespace, j.holder, j.opts.Lease, keys, caller, opIDs, states, records, bodies, sealed, updated,
		j.ring != nil}
	settles := j.takeSettles(settleBatch, true)
	written, err := j.insertWith(ctx, settles, j.sql(q), args, n)
	if settles != nil && rolledBack(err) {
		// PostgreSQL refused a statement, perhaps the settles' (a lock
		// wait cut short, rideLockTimeout): the write-aheads go alone, the
		// settles later on their own.
		written, err = j.insertWith(ctx, nil, j.sql(q), args, n)
	}
	if err == nil {
		j.stats.commits.Add(1)
		j.stats.writeAheads.Add(uint64(len(written)))
	}
	refused := journal.ErrNameTaken
	if err == nil && len(written) == 0 && j.ring == nil && j.markedSealed(ctx) { // the mark refuses all or none
		refused = j.errNeedsKeyring()
	}
	for _, c := range batch {
		if err != nil {
			c.answer(j.fail("create", err))
			continue
		}
		rec := c.in.rec
		r, ok := written[[2]string{rec.Key, rec.OperationID}]
		if !ok {
			c.answer(refused)
			continue
		}
		journal.SetRef(rec, journal.Ref{Seq: uint64(r.seq), Part: int(r.epoch)})
		j.noteLease(journal.NameOf(rec), r)
		c.answer(nil)
	}
}

// insertWith runs the write-ahead INSERT q and, if s is not nil, the
// UPDATE of the settles s holds, in one transaction and one round trip,
// and ends s. It returns the rows the INSERT wrote (at most n), by key and
// operation ID.
func (j *Journal) insertWith(ctx context.Context, s *settling, q string, args []any, n int) (map[[2]string]lease, error) {
	written := make(map[[2]string]lease, n)
	b := &pgx.Batch{}
	var changed map[int64]bool
	if s != nil {
		b.Queue(`BEGIN`)
	}
	b.Queue(q, args...).Query(func(rows pgx.Rows) error {
		var r lease
		var key, opID string
		_, err := pgx.ForEachRow(rows, []any{&r.seq, &r.epoch, &key, &opID}, func() error {
			written[[2]string{key, opID}] = r
			return nil
		})
		return err
	})
	if s != nil {
		changed = make(map[int64]bool, len(s.batch))
		b.Queue(rideLockTimeout)
		j.queueUpdate(b, s, changed)
		b.Queue(`COMMIT`)
	}
	err := j.pool.SendBatch(ctx, b).Close()
	if s != nil {
		j.settled(s, changed, err, true)
	}
	return written, err
}

// markedSealed reports whether the namespace is marked sealed, and if so
// notes it: this Journal, without Options.Encryption, writes no new row
// there from then on. An error reads as not marked: the insert that asks
// has written nothing either way.
func (j *Journal) markedSealed(ctx context.Context) bool {
	var sealed bool
	err := j.pool.QueryRow(ctx, j.sql(`SELECT sealed FROM {s}.namespaces WHERE namespace = $1`), j.opts.Namespace).Scan(&sealed)
	if err == nil && sealed {
		j.sealedNS.Store(true)
	}
	return err == nil && sealed
}
