// This file builds the PostgreSQL rows, when -postgres names a server: idem
// over the PostgreSQL journal (journal/pgjournal), the PostgreSQL floor
// (pgfloor.go) and its contract floor (pgfloor_contract.go), the same
// POSTs, each journaled in a schema of the run's own, dropped at the end.
// Each row has its own pool, counted by its own pgCounter; together they
// stay within the server's max_connections.

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgRow is the name of the PostgreSQL row.
const pgRow = "idem-pg POST"

// pgFloorConns is the floor's pool: its committer needs one connection.
const pgFloorConns = 2

// postgresRows opens a pool of maxConc connections to url, a journal in a
// new schema, and an idem Transport over it with base, then the floor with
// a pool of its own in the same schema; the function it returns closes
// them, drops the schema and closes the pools.
func postgresRows(ctx context.Context, url string, base http.RoundTripper, maxConc int, post string) ([]client, func() error, error) {
	idemCount, floorCount, contractCount := &pgCounter{}, &pgCounter{}, &pgCounter{}
	pool, err := pgPool(ctx, url, int32(max(4, maxConc)), idemCount)
	if err != nil {
		return nil, nil, err
	}
	floorPool, err := pgPool(ctx, url, pgFloorConns, floorCount)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	contractPool, err := pgPool(ctx, url, pgFloorConns, contractCount)
	if err != nil {
		pool.Close()
		floorPool.Close()
		return nil, nil, err
	}
	schema := "idem_bench_" + rand.Text()[:8]
	contractSchema := schema + "_contract"
	dropSchema := func() error {
		floorPool.Close()
		contractPool.Close()
		_, err := pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+`, `+
			pgx.Identifier{contractSchema}.Sanitize()+` CASCADE`)
		pool.Close()
		return err
	}
	j, err := pgjournal.Open(ctx, pool, &pgjournal.Options{Schema: schema})
	if err != nil {
		dropSchema()
		return nil, nil, fmt.Errorf("-postgres: %w", err)
	}
	tr, err := idem.NewTransport(j, &idem.Options{Base: base})
	if err != nil {
		j.Close()
		dropSchema()
		return nil, nil, err
	}
	floor, err := newPGFloor(ctx, floorPool, schema, base)
	if err != nil {
		j.Close()
		dropSchema()
		return nil, nil, fmt.Errorf("-postgres: floor: %w", err)
	}
	contract, err := newPGContractFloor(ctx, contractPool, contractSchema, base)
	if err != nil {
		floor.Close()
		j.Close()
		dropSchema()
		return nil, nil, fmt.Errorf("-postgres: contract floor: %w", err)
	}
	closeAll := func() error {
		floor.Close()
		contract.Close()
		return errors.Join(j.Close(), dropSchema())
	}
	idemCounts := func() journalCounts {
		st := j.Stats()
		return journalCounts{commits: st.Commits, writeAheads: st.WriteAheads}
	}
	rows := []client{
		{name: pgRow, do: sender(&http.Client{Transport: tr}, http.MethodPost, post, paymentBody, http.StatusCreated), commits: idemCounts, pg: idemCount.counts},
		{name: pgFloorRow, do: sender(&http.Client{Transport: floor}, http.MethodPost, post, paymentBody, http.StatusCreated), commits: floor.stats, pg: floorCount.counts},
		{name: pgContractRow, do: sender(&http.Client{Transport: contract}, http.MethodPost, post, paymentBody, http.StatusCreated), commits: contract.stats, pg: contractCount.counts},
	}
	return rows, closeAll, nil
}

// pgPool opens a pool of at most conns connections to url, traced by count.
func pgPool(ctx context.Context, url string, conns int32, count *pgCounter) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	cfg.MaxConns = conns
	cfg.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	return pool, nil
}
