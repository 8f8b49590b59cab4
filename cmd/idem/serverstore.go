// This file opens the idempotency store that the fake servers of a cluster (cluster.go)
// share: in memory by default, Redis (server/redisstore) from a redis:// URL, its records
// under a prefix of the run's own, deleted at the end, or PostgreSQL (server/pgstore) from
// a postgres:// URL whose schema query parameter names the schema of its table. With
// Redis or PostgreSQL each server gets a client of its own, as each instance of a service
// has, and reaches the store through a fault proxy of its own (storelink.go), so that a
// fault on one server's link leaves the other's alone.

package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/idem-go/idem/server/redisstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// The store clients' own timeouts, unless the URL sets them (go-redis's dial_timeout and
// read_timeout, pgx's connect_timeout), as a service that keeps its store calls short
// sets them. The middleware sets no deadline of its own on a store call (issue 36).
const (
	storeDialTimeout = 2 * time.Second
	storeReadTimeout = time.Second // go-redis only: pgx has no read timeout
)

// serverStore is the idempotency store of a cluster's servers.
type serverStore struct {
	kind   string         // "memory", "Redis" or "PostgreSQL", for the report
	stores []server.Store // one per server: its own client, or the one memstore
	links  []*storeLink   // one per server, each store's way to Redis or PostgreSQL; none in memory
	// inProgress counts the run's records that are in progress in the store now, over a
	// direct connection that no fault touches; nil in memory.
	inProgress func(ctx context.Context) (int, error)
	close      []func() // in order
	net        *chaosNet
}

// openServerStore opens the store rawURL names for n servers; with cn (chaos -netns), each
// server's client connects from the server's namespace to a link proxy in the store's.
func openServerStore(rawURL string, n int, cn *chaosNet) (*serverStore, error) {
	ss := &serverStore{net: cn}
	var err error
	switch {
	case rawURL == "":
		ss.kind = "memory"
		st := memstore.New(nil)
		for range n {
			ss.stores = append(ss.stores, st)
		}
		return ss, nil
	case isPostgres(rawURL):
		ss.kind = "PostgreSQL"
		err = ss.openPG(rawURL, n)
	case strings.HasPrefix(rawURL, "redis://"), strings.HasPrefix(rawURL, "rediss://"):
		ss.kind = "Redis"
		err = ss.openRedis(rawURL, n)
	default:
		return nil, fmt.Errorf("-server-store %q: want redis://… or postgres://… (or nothing, for one in memory)", rawURL)
	}
	if err != nil {
		ss.Close()
		return nil, err
	}
	return ss, nil
}

// link starts a storeLink to addr for the next server.
func (ss *serverStore) link(addr string) (*storeLink, error) {
	newLink := newStoreLink
	if ss.net != nil {
		newLink = ss.net.storeLink
	}
	l, err := newLink(addr)
	if err != nil {
		return nil, err
	}
	ss.links = append(ss.links, l)
	ss.close = append(ss.close, func() { l.Close() })
	return l, nil
}

func (ss *serverStore) openRedis(rawURL string, n int) error {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return fmt.Errorf("-server-store: %w", err)
	}
	opts.ContextTimeoutEnabled = true // deadlines bound every store call (redisstore.ErrNoContextTimeout)
	// A client of the run's own, not through any link: for the checks and the cleanup.
	direct := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := direct.Ping(ctx).Err(); err != nil {
		direct.Close()
		return fmt.Errorf("-server-store redis://%s: %w", opts.Addr, err)
	}
	prefix := "idem-run-" + rand.Text()[:10] + ":"
	ss.close = append(ss.close, func() {
		// The run's records are of no use after it: delete them rather than leave them
		// to expire.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := direct.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			direct.Del(ctx, iter.Val())
		}
		direct.Close()
	})
	for i := range n {
		l, err := ss.link(opts.Addr)
		if err != nil {
			return err
		}
		o := *opts
		o.Addr = l.Addr()
		if ss.net != nil {
			o.Dialer = ss.net.serverDial(i)
		}
		o.DialTimeout = cmp.Or(o.DialTimeout, storeDialTimeout)
		o.ReadTimeout = cmp.Or(o.ReadTimeout, storeReadTimeout)
		client := redis.NewClient(&o)
		ss.close = append(ss.close, func() { client.Close() })
		store, err := redisstore.Open(ctx, client, &redisstore.Options{Prefix: prefix})
		if err != nil {
			return fmt.Errorf("-server-store: %w", err)
		}
		ss.stores = append(ss.stores, store)
	}
	ss.inProgress = func(ctx context.Context) (int, error) { return redisInProgress(ctx, direct, prefix) }
	return nil
}

// redisInProgress counts the records under prefix that are in progress: a string value
// that starts "p:" (server/redisstore's encode.go). The other keys under prefix (released
// tokens' sets) are not strings, and are skipped.
func redisInProgress(ctx context.Context, c *redis.Client, prefix string) (int, error) {
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, err
	}
	n := 0
	for batch := range slices.Chunk(keys, 500) {
		pipe := c.Pipeline()
		cmds := make([]*redis.StringCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.Get(ctx, k)
		}
		_, _ = pipe.Exec(ctx) // each command's own error is read below
		for _, cmd := range cmds {
			v, err := cmd.Result()
			switch {
			case err == redis.Nil || redis.HasErrorPrefix(err, "WRONGTYPE"):
				// gone since the scan, or not a record
			case err != nil:
				return 0, err
			case strings.HasPrefix(v, "p:"):
				n++
			}
		}
	}
	return n, nil
}

func (ss *serverStore) openPG(rawURL string, n int) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("-server-store: %w", err)
	}
	q := u.Query()
	opts := &pgstore.Options{Schema: q.Get("schema")}
	q.Del("schema")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A pool of the run's own, not through any link: it applies the migrations once, and
	// serves the checks.
	direct, err := pgxpool.New(ctx, u.String())
	if err == nil {
		ss.close = append(ss.close, direct.Close)
		err = direct.Ping(ctx)
	}
	if err == nil {
		err = pgstore.Migrate(ctx, direct, opts)
	}
	if err != nil {
		return fmt.Errorf("-server-store %s: %w", u.Redacted(), err)
	}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return fmt.Errorf("-server-store: %w", err)
	}
	host, port := cfg.ConnConfig.Host, cfg.ConnConfig.Port
	if strings.HasPrefix(host, "/") {
		return fmt.Errorf("-server-store %s: a Unix socket (%s) cannot go through the store-link proxy: give a host and port", u.Redacted(), host)
	}
	for i := range n {
		l, err := ss.link(net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			return err
		}
		c := cfg.Copy()
		lhost, lport, _ := net.SplitHostPort(l.Addr())
		p, _ := strconv.Atoi(lport)
		c.ConnConfig.Host, c.ConnConfig.Port = lhost, uint16(p)
		for _, fb := range c.ConnConfig.Fallbacks { // sslmode=prefer's plain try, say
			if fb.Host == host && fb.Port == port {
				fb.Host, fb.Port = lhost, uint16(p)
			}
		}
		if ss.net != nil {
			c.ConnConfig.DialFunc = ss.net.serverDial(i)
		}
		if c.ConnConfig.ConnectTimeout == 0 {
			c.ConnConfig.ConnectTimeout = storeDialTimeout
		}
		pool, err := pgxpool.NewWithConfig(ctx, c)
		if err != nil {
			return fmt.Errorf("-server-store %s: %w", u.Redacted(), err)
		}
		ss.close = append(ss.close, pool.Close)
		store, err := pgstore.Open(ctx, pool, opts)
		if err != nil {
			return fmt.Errorf("-server-store %s: %w", u.Redacted(), err)
		}
		ss.close = append(ss.close, store.Close)
		ss.stores = append(ss.stores, store)
	}
	// Records left in progress by an earlier run in the same schema are not this run's.
	schema := pgx.Identifier{cmp.Or(opts.Schema, pgstore.DefaultSchema)}.Sanitize()
	query := `SELECT scope FROM ` + schema + `.server_records
		WHERE token IS NOT NULL AND status IS NULL AND expires_at > now()` // server/pgstore's queries.go
	scopes := func(ctx context.Context) (map[string]bool, error) {
		rows, err := direct.Query(ctx, query)
		if err != nil {
			return nil, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		set := map[string]bool{}
		for _, id := range ids {
			set[id] = true
		}
		return set, err
	}
	before, err := scopes(ctx)
	if err != nil {
		return fmt.Errorf("-server-store %s: %w", u.Redacted(), err)
	}
	ss.inProgress = func(ctx context.Context) (int, error) {
		now, err := scopes(ctx)
		n := 0
		for id := range now {
			if !before[id] {
				n++
			}
		}
		return n, err
	}
	return nil
}

// Close closes the clients and the links, and deletes the run's records in Redis.
func (ss *serverStore) Close() {
	for i := len(ss.close) - 1; i >= 0; i-- {
		ss.close[i]()
	}
	ss.close = nil
}
