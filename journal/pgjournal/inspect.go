// This file holds what reads a journal without opening it: SchemaVersion,
// Namespaces and Records, for tools that inspect a fleet's journal (the
// idem command's "journal ls", "show" and "stats") without creating tables
// or taking leases.

package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoJournal is returned by Records when opts.Schema holds no journal
// tables (Migrate never ran there).
var ErrNoJournal = errors.New("pgjournal: no journal tables in this schema")

// SchemaVersion returns the version of the journal tables in opts.Schema:
// 0 if there are none, 2 for this pgjournal's (migrate.go). It only reads.
func SchemaVersion(ctx context.Context, pool *pgxpool.Pool, opts *Options) (int, error) {
	c, err := opts.resolved()
	if err != nil {
		return 0, err
	}
	if pool == nil {
		return 0, errNilPool
	}
	var v int
	err = pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+pgx.Identifier{c.Schema}.Sanitize()+`.version`).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined_table, invalid_schema_name
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgjournal: schema version of %s: %w", c.Schema, err)
	}
	return v, nil
}

// Namespaces returns the namespaces of the journal in opts.Schema, sorted:
// each one a Journal was ever opened on, with or without operations now.
// opts.Namespace is not read. It returns ErrNoJournal if the schema holds no
// journal tables, and only reads: a tool names the namespaces there are
// when asked for one that is not (a misspelt one lists as empty).
func Namespaces(ctx context.Context, pool *pgxpool.Pool, opts *Options) ([]string, error) {
	c, err := opts.resolved()
	if err == nil && pool == nil {
		err = errNilPool
	}
	if err != nil {
		return nil, err
	}
	switch v, err := SchemaVersion(ctx, pool, &c); {
	case err != nil:
		return nil, err
	case v == 0:
		return nil, fmt.Errorf("%w: %s", ErrNoJournal, c.Schema)
	}
	rows, err := pool.Query(ctx, `SELECT namespace FROM `+pgx.Identifier{c.Schema}.Sanitize()+`.namespaces ORDER BY namespace COLLATE "C"`)
	if err == nil {
		var names []string
		if names, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			return names, nil
		}
	}
	return nil, fmt.Errorf("pgjournal: namespaces of %s: %w", c.Schema, err)
}

// inspectPage is how many rows Records reads at once.
const inspectPage = 256

// Records yields every operation of opts.Namespace, in any state, in
// creation order, a page at a time; with bodies only if withBody (a body is
// up to the Transport's MaxBodyBytes, 8 MiB by default). Sealed rows are
// opened with opts.Encryption; one it cannot open is listed Sealed, without
// its sealed part or body. It only reads: it
// creates no table and takes no lease, so a running fleet is undisturbed.
// It yields ErrNoJournal if the schema holds no journal, and ends at the
// first error, which it yields.
func Records(ctx context.Context, pool *pgxpool.Pool, opts *Options, withBody bool) iter.Seq2[*journal.Record, error] {
	return func(yield func(*journal.Record, error) bool) {
		c, err := opts.resolved()
		if err == nil && pool == nil {
			err = errNilPool
		}
		if err != nil {
			yield(nil, err)
			return
		}
		v, err := SchemaVersion(ctx, pool, &c)
		switch {
		case err != nil:
			yield(nil, err)
			return
		case v == 0:
			yield(nil, fmt.Errorf("%w: %s", ErrNoJournal, c.Schema))
			return
		}
		q := `SELECT ` + columns
		if v < 2 { // not migrated to sealed rows yet: none is sealed
			q = `SELECT ` + strings.Replace(columns, "sealed", "NULL::bytea", 1)
		}
		if withBody {
			q += `, body`
		}
		q += ` FROM ` + pgx.Identifier{c.Schema}.Sanitize() + `.operations
			WHERE namespace = $1 AND seq > $2 ORDER BY seq LIMIT $3`
		page := func(after uint64) ([]*journal.Record, error) {
			rows, err := pool.Query(ctx, q, c.Namespace, int64(after), inspectPage)
			if err != nil {
				return nil, fmt.Errorf("pgjournal: list %s/%s: %w", c.Schema, c.Namespace, err)
			}
			recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*journal.Record, error) {
				rec, _, err := scanRecord(row, withBody, c.ring)
				return rec, err
			})
			if err != nil {
				return nil, fmt.Errorf("pgjournal: list %s/%s: %w", c.Schema, c.Namespace, err)
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
