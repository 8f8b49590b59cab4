// This file opens the idempotency Store that the fake servers of a cluster (cluster.go)
// share: in memory by default, or PostgreSQL (server/pgstore) from a postgres:// URL whose
// schema query parameter names the schema of its table.

package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// openServerStore opens the Store rawURL names and returns it with the function that
// closes it.
func openServerStore(rawURL string) (server.Store, func(), error) {
	switch {
	case rawURL == "":
		return memstore.New(nil), func() {}, nil
	case isPostgres(rawURL):
		return openPGServerStore(rawURL)
	}
	return nil, nil, fmt.Errorf("-server-store %q: want postgres://… (or nothing, for one in memory)", rawURL)
}

func openPGServerStore(rawURL string) (server.Store, func(), error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("-server-store: %w", err)
	}
	q := u.Query()
	opts := &pgstore.Options{Schema: q.Get("schema")}
	q.Del("schema")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, u.String())
	if err == nil {
		err = pool.Ping(ctx)
	}
	var store *pgstore.Store
	if err == nil {
		store, err = pgstore.Open(ctx, pool, opts)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, nil, fmt.Errorf("-server-store %s: %w", u.Redacted(), err)
	}
	return store, func() { store.Close(); pool.Close() }, nil
}
