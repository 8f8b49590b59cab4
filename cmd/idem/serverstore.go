// This file opens the idempotency Store that the fake servers of a cluster (cluster.go)
// share: in memory by default, Redis (server/redisstore) from a redis:// URL, its records
// under a prefix of the run's own, deleted at the end, or PostgreSQL (server/pgstore) from
// a postgres:// URL whose schema query parameter names the schema of its table.

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/idem-go/idem/server/redisstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// openServerStore opens the Store rawURL names and returns it with the function that
// closes it.
func openServerStore(rawURL string) (server.Store, func(), error) {
	switch {
	case rawURL == "":
		return memstore.New(nil), func() {}, nil
	case isPostgres(rawURL):
		return openPGServerStore(rawURL)
	case strings.HasPrefix(rawURL, "redis://"), strings.HasPrefix(rawURL, "rediss://"):
		return openRedisServerStore(rawURL)
	}
	return nil, nil, fmt.Errorf("-server-store %q: want redis://… or postgres://… (or nothing, for one in memory)", rawURL)
}

func openRedisServerStore(rawURL string) (server.Store, func(), error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("-server-store: %w", err)
	}
	opts.ContextTimeoutEnabled = true // deadlines bound every store call (redisstore.ErrNoContextTimeout)
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	prefix := "idem-run-" + rand.Text()[:10] + ":"
	store, err := redisstore.New(client, &redisstore.Options{Prefix: prefix})
	if err == nil {
		err = client.Ping(ctx).Err()
	}
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("-server-store redis://%s: %w", opts.Addr, err)
	}
	return store, func() {
		// The run's records are of no use after it: delete them rather than leave them
		// to expire.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		client.Close()
	}, nil
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
