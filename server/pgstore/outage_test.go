// outage_test.go: S37 on PostgreSQL. The database cannot be reached (the Store's pool points
// at a loopback port that is closed; the real server keeps running for everyone else):
// the middleware fails closed, 503 problem+json, the handler not run, nothing stored. On
// the real database, the same key then works normally.

package pgstore_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// forwarder relays loopback connections to the real server until closed; after close its
// port refuses connections.
type forwarder struct {
	l     net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newForwarder(t *testing.T, target string) *forwarder {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &forwarder{l: l}
	f.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, up)
			f.mu.Unlock()
			f.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			f.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
	t.Cleanup(f.close)
	return f
}

// close closes the port and every relayed connection, and waits for the relays.
func (f *forwarder) close() {
	f.l.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *forwarder) port() uint16 { return uint16(f.l.Addr().(*net.TCPAddr).Port) }

func TestS37PostgresDown(t *testing.T) {
	leakcheck.Check(t)
	pool := testPool(t)
	schema := testSchema(t, pool)
	upStore := openStore(t, pool, pgstore.Options{Schema: schema})
	payments(t, pool, schema)

	// A pool through a forwarder, its Store opened (migrated) while the forwarder runs; then
	// the forwarder's port is closed and the pool's connections dropped.
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	require.NoError(t, err)
	f := newForwarder(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = "127.0.0.1", f.port(), nil
	downPool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(downPool.Close)
	down := openStore(t, downPool, pgstore.Options{Schema: schema})
	f.close()
	downPool.Reset()

	var ran atomic.Int64
	p := &payer{pool: pool, store: upStore, schema: schema, before: func() { ran.Add(1) }}
	in := newInstance(t, server.Options{Store: down}, p)
	const body = `{"ref":"order-s37","amount":42}`
	for range 2 {
		got := in.post("k-s37", body)
		require.Equal(t, http.StatusServiceUnavailable, got.Status, "%s", got.Body)
		assert.Equal(t, "store-unavailable", got.ProblemType(t))
		assert.Equal(t, "1", got.Header.Get("Retry-After"))
		assert.NotContains(t, string(got.Body), "127.0.0.1", "the database's error leaks to the client")
	}
	assert.Zero(t, ran.Load(), "the handler ran without a claim")
	assert.Equal(t, 2, in.obs.Count("store-error"))
	var records int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+`.server_records`).Scan(&records))
	assert.Zero(t, records, "something was stored while the database was down")

	up := newInstance(t, server.Options{Store: upStore}, p)
	first := up.post("k-s37", body)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	assert.False(t, first.Replayed())
	again := up.post("k-s37", body)
	assert.True(t, again.Replayed())
	assert.Equal(t, first.Body, again.Body)
	assert.EqualValues(t, 1, ran.Load())
	assert.Equal(t, 1, paymentCount(t, pool, schema, "order-s37"))
}
