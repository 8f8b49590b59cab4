// This file opens the server child's shared services: a go-redis client and
// a redisstore under a key prefix of the run's own, a pgxpool and a pgstore in
// a schema of the run's own; the floors use the same clients. cleanup deletes
// the run's keys, drops its schema and closes the clients.

package serverbench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idem-go/idem/server/pgstore"
	"github.com/idem-go/idem/server/redisstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// stores is what the child opened; nil fields were not asked for.
type stores struct {
	rdb         *redis.Client
	redisStore  *redisstore.Store
	redisPrefix string // "idem-serverbench:<random>:"; no glob character

	pool     *pgxpool.Pool
	pgStore  *pgstore.Store
	pgSchema string // "idem_serverbench_<random>"
}

func openStores(ctx context.Context, cc childConfig) (*stores, error) {
	st := &stores{}
	if cc.Redis != "" {
		if err := st.openRedis(ctx, cc.Redis, cc.RedisConns); err != nil {
			return nil, errors.Join(fmt.Errorf("-redis %s: %w", cc.Redis, err), st.cleanup())
		}
	}
	if cc.Postgres != "" {
		if err := st.openPG(ctx, cc.Postgres, cc.PGConns); err != nil {
			return nil, errors.Join(fmt.Errorf("-postgres: %w", err), st.cleanup())
		}
	}
	return st, nil
}

func (st *stores) openRedis(ctx context.Context, addr string, conns int) error {
	st.rdb = redis.NewClient(&redis.Options{Addr: addr, PoolSize: conns, ContextTimeoutEnabled: true})
	st.rdb.AddHook(tripHook{})
	if err := st.rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	st.redisPrefix = "idem-serverbench:" + rand.Text() + ":"
	var err error
	st.redisStore, err = redisstore.Open(ctx, st.rdb, &redisstore.Options{Prefix: st.redisPrefix})
	return err
}

func (st *stores) openPG(ctx context.Context, url string, conns int) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(conns)
	cfg.ConnConfig.Tracer = tripTracer{}
	// The sessions start with pgstore's statement bounds, as its Options.StatementTimeout
	// suggests, so the Store sends each statement alone; the floor shares the pool.
	for _, p := range []string{"lock_timeout", "statement_timeout"} {
		if _, set := cfg.ConnConfig.RuntimeParams[p]; !set {
			cfg.ConnConfig.RuntimeParams[p] = "2s"
		}
	}
	if st.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	st.pgSchema = "idem_serverbench_" + strings.ToLower(rand.Text()[:10])
	if st.pgStore, err = pgstore.Open(ctx, st.pool, &pgstore.Options{Schema: st.pgSchema}); err != nil {
		return err
	}
	if err := createPGFloor(ctx, st.pool, st.pgSchema); err != nil {
		return err
	}
	return createPGContractFloor(ctx, st.pool, st.pgSchema)
}

// cleanup deletes every key under the run's prefix, drops its schema and
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
