// This file builds the row of idem over the PostgreSQL journal
// (journal/pgjournal), when -postgres names a server: the same POSTs, each
// journaled in a schema of the run's own, dropped at the end.

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgRow is the name of the PostgreSQL row.
const pgRow = "idem-pg POST"

// postgresRow opens a pool of maxConc connections to url, a journal in a
// new schema, and an idem Transport over it with base; the function it
// returns closes the journal, drops the schema and closes the pool.
func postgresRow(ctx context.Context, url string, base http.RoundTripper, maxConc int, post string) (client, func() error, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return client{}, nil, fmt.Errorf("-postgres: %w", err)
	}
	cfg.MaxConns = int32(max(4, maxConc))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return client{}, nil, fmt.Errorf("-postgres: %w", err)
	}
	schema := "idem_bench_" + rand.Text()[:8]
	dropSchema := func() error {
		_, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		pool.Close()
		return err
	}
	j, err := pgjournal.Open(ctx, pool, &pgjournal.Options{Schema: schema})
	if err != nil {
		dropSchema()
		return client{}, nil, fmt.Errorf("-postgres: %w", err)
	}
	tr, err := idem.NewTransport(j, &idem.Options{Base: base})
	if err != nil {
		j.Close()
		dropSchema()
		return client{}, nil, err
	}
	closeAll := func() error {
		j.Close()
		return dropSchema()
	}
	hc := &http.Client{Transport: tr}
	commits := func() journalCounts {
		st := j.Stats()
		return journalCounts{commits: st.Commits, writeAheads: st.WriteAheads}
	}
	return client{name: pgRow, do: sender(hc, http.MethodPost, post, paymentBody, http.StatusCreated), commits: commits}, closeAll, nil
}
