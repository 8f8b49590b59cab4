// This file opens the service a server child's row needs: a go-redis client
// whose keys go under the child's own prefix, or a pgxpool and the child's own
// schema; rowHandler (serve.go) makes the row's store on it. cleanup deletes
// the child's keys, drops its schema and closes the clients.

package serverbench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idem-go/idem/server/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// stores is what the child opened; nil fields were not asked for.
type stores struct {
	rdb         *redis.Client
	redisPrefix string // childConfig.RedisPrefix; no glob character

	pool     *pgxpool.Pool
	pgSchema string         // childConfig.PGSchema, made by openPG
	pgStore  *pgstore.Store // the idem pg row's, closed before its schema is dropped
}

func openStores(ctx context.Context, cc childConfig) (*stores, error) {
	st := &stores{}
	if cc.Redis != "" {
		if err := st.openRedis(ctx, cc.Redis, cc.RedisConns, cc.RedisPrefix); err != nil {
			return nil, errors.Join(fmt.Errorf("-redis %s: %w", cc.Redis, err), st.cleanup())
		}
	}
	if cc.Postgres != "" {
		if err := st.openPG(ctx, cc.Postgres, cc.PGConns, cc.PGSchema); err != nil {
			return nil, errors.Join(fmt.Errorf("-postgres: %w", err), st.cleanup())
		}
	}
	return st, nil
}

func (st *stores) openRedis(ctx context.Context, addr string, conns int, prefix string) error {
	st.rdb = redis.NewClient(&redis.Options{Addr: addr, PoolSize: conns, ContextTimeoutEnabled: true})
	st.rdb.AddHook(tripHook{})
	if err := st.rdb.Ping(ctx).Err(); err != nil {
		return err // no key to delete then
	}
	st.redisPrefix = prefix
	return nil
}

func (st *stores) openPG(ctx context.Context, url string, conns int, schema string) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(conns)
	cfg.ConnConfig.Tracer = tripTracer{}
	// The sessions start with pgstore's statement bounds, as its Options.StatementTimeout
	// suggests, so the Store sends each statement alone; the floors' sessions start the same.
	for _, p := range []string{"lock_timeout", "statement_timeout"} {
		if _, set := cfg.ConnConfig.RuntimeParams[p]; !set {
			cfg.ConnConfig.RuntimeParams[p] = "2s"
		}
	}
	if st.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	if _, err = st.pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return err
	}
	st.pgSchema = schema
	return nil
}

// cleanup deletes every key under the child's prefix, drops its schema and
// closes the clients. It may be called on a partly opened stores.
func (st *stores) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout-20*time.Second)
	defer cancel()
	var err error
	if st.rdb != nil {
		if st.redisPrefix != "" {
			err = deleteKeys(ctx, st.rdb, st.redisPrefix)
		}
		err = errors.Join(err, st.rdb.Close())
	}
	if st.pool != nil {
		if st.pgStore != nil {
			st.pgStore.Close()
		}
		if st.pgSchema != "" {
			_, dropErr := st.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{st.pgSchema}.Sanitize()+` CASCADE`)
			err = errors.Join(err, dropErr)
		}
		st.pool.Close()
	}
	return err
}

// deleteKeys unlinks every key under prefix, a SCAN page at a time.
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := rdb.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return errors.Join(iter.Err(), flush())
}
