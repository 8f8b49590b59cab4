// This file holds All (journal.Lister): every operation of the Journal's
// namespace, whoever leases it, for an inspection of a running fleet.

package pgjournal

import (
	"context"
	"iter"

	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5"
)

var _ journal.Lister = (*Journal)(nil)

// All yields every operation of the namespace without its body
// (journal.Lister): the pending ones, leased by any instance or by none,
// then the settled, failed and expired ones, each group in creation order,
// a page at a time. It takes no lease; it first writes this Journal's
// queued settles, so that it lists their newest state.
func (j *Journal) All(ctx context.Context) iter.Seq2[*journal.Record, error] {
	return func(yield func(*journal.Record, error) bool) {
		if err := j.writeQueued(ctx); err != nil {
			yield(nil, err)
			return
		}
		for _, where := range []string{`state = 1`, `state <> 1`} {
			q := j.sql(`SELECT ` + columns + ` FROM {s}.operations
				WHERE namespace = $1 AND ` + where + ` AND seq > $2 ORDER BY seq LIMIT $3`)
			page := func(after uint64) ([]*journal.Record, error) {
				if err := j.check(); err != nil {
					return nil, err
				}
				rows, err := j.pool.Query(ctx, q, j.opts.Namespace, int64(after), inspectPage)
				if err != nil {
					return nil, j.fail("list", err)
				}
				recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*journal.Record, error) {
					rec, _, err := scanRecord(row, false, j.ring) // listed Sealed if it does not open
					return rec, err
				})
				if err != nil {
					return nil, j.fail("list", err)
				}
				return recs, nil
			}
			for rec, err := range journal.Pages(ctx, 0, inspectPage, page) {
				if !yield(rec, err) || err != nil {
					return
				}
			}
		}
	}
}
