// completetx_test.go checks CompleteTx: the business row and the stored response commit
// together or not at all, the middleware's own completion afterwards is refused
// harmlessly, and a record taken over is fenced inside the service's transaction too.

package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// On the Store alone: a committed CompleteTx makes the record done with its response, a
// rolled-back one leaves it in progress under the same token, and a stale hold is fenced.
func TestCompleteTxCommitAndRollback(t *testing.T) {
	pool := testPool(t)
	s := openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
	ctx := context.Background()
	resp := &server.Response{Status: 201, Body: []byte(`{"id":1}`)}
	claim := func(key string, lease time.Duration) server.Hold {
		sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: key}
		cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", lease, time.Hour)
		require.NoError(t, err)
		require.True(t, cl.Claimed)
		return server.Hold{Scope: sc, Token: cl.Token}
	}
	record := func(h server.Hold) server.Record {
		cl, err := s.Claim(ctx, h.Scope, server.NewToken(), "fp", time.Minute, time.Hour)
		require.NoError(t, err)
		require.False(t, cl.Claimed)
		return cl.Record
	}

	committed := claim("commit", time.Minute)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, s.CompleteTx(ctx, tx, committed, resp))
	require.NoError(t, tx.Commit(ctx))
	rec := record(committed)
	require.Equal(t, server.StateDone, rec.State)
	assert.Equal(t, resp.Body, rec.Response.Body)
	assert.InDelta(t, server.DefaultTTL.Seconds(), rec.ExpiresIn.Seconds(), 5, "Options.TTL's default")
	assert.ErrorIs(t, s.Release(ctx, committed.Scope, committed.Token), server.ErrLeaseLost,
		"the middleware's release after the transaction committed")
	assert.NoError(t, s.Complete(ctx, committed.Scope, committed.Token, &server.Response{Status: 500}, time.Hour),
		"a repeated completion by the same token")
	assert.Equal(t, resp.Body, record(committed).Response.Body, "the repeat changed the record")

	rolled := claim("rollback", time.Minute)
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, s.CompleteTx(ctx, tx, rolled, resp))
	require.NoError(t, tx.Rollback(ctx))
	rec = record(rolled)
	assert.Equal(t, server.StateInProgress, rec.State)
	assert.Equal(t, rolled.Token, rec.Token)
	require.NoError(t, s.Release(ctx, rolled.Scope, rolled.Token), "the holder still holds it")

	stale := claim("stale", 50*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, s.TakeOver(ctx, stale.Scope, stale.Token, server.NewToken(), time.Minute))
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, s.CompleteTx(ctx, tx, stale, resp), server.ErrLeaseLost)
	require.NoError(t, tx.Rollback(ctx))

	assert.Error(t, s.CompleteTx(ctx, nil, committed, nil), "a nil response")
}

// Through the middleware: the handler writes its payment and completes the record in one
// transaction. Committed, the payment exists once and every retry replays its answer;
// the middleware's own completion is refused without a lost lease being reported. Rolled
// back (after CompleteTx), nothing is stored: the handler's 500 releases the key (the
// store policy), and the retry runs the handler again.
func TestCompleteTxInHandler(t *testing.T) {
	leakcheck.Check(t)
	pool := testPool(t)
	schema := testSchema(t, pool)
	s := openStore(t, pool, pgstore.Options{Schema: schema})
	payments(t, pool, schema)
	var failing atomic.Bool
	p := &payer{pool: pool, store: s, schema: schema, fail: failing.Load}
	in := newInstance(t, server.Options{Store: s}, p)

	const body = `{"ref":"order-1","amount":1250}`
	first := in.post("k-commit", body)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	assert.False(t, first.Replayed())
	eventually(t, 2*time.Second, "the answer counted as stored", func() bool { return in.obs.Count("stored") == 1 })
	for range 2 {
		again := in.post("k-commit", body)
		assert.Equal(t, http.StatusCreated, again.Status)
		assert.True(t, again.Replayed())
		assert.Equal(t, first.Body, again.Body)
		assert.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
	}
	assert.Equal(t, 1, paymentCount(t, pool, schema, "order-1"))
	assert.EqualValues(t, 1, p.effects.Load())
	assert.Zero(t, in.obs.Count("lease-lost"), "the refused completion was reported as a lost lease")

	failing.Store(true)
	const body2 = `{"ref":"order-2","amount":990}`
	got := in.post("k-rollback", body2)
	assert.Equal(t, http.StatusInternalServerError, got.Status)
	assert.Zero(t, paymentCount(t, pool, schema, "order-2"), "the rolled-back payment exists")
	failing.Store(false)
	got = in.post("k-rollback", body2)
	require.Equal(t, http.StatusCreated, got.Status, "%s", got.Body)
	assert.False(t, got.Replayed(), "the rolled-back answer was stored")
	assert.True(t, in.post("k-rollback", body2).Replayed())
	assert.Equal(t, 1, paymentCount(t, pool, schema, "order-2"))
	assert.EqualValues(t, 2, p.effects.Load())
}

// A heartbeat that falls while the handler's transaction holds the completed row waits
// for it, then finds the record done: that is the handler's own completion, not a lost
// lease, and must not be reported as one.
func TestCompleteTxHeartbeatNotLost(t *testing.T) {
	leakcheck.Check(t)
	pool := testPool(t)
	schema := testSchema(t, pool)
	s := openStore(t, pool, pgstore.Options{Schema: schema})
	payments(t, pool, schema)
	const lease = 300 * time.Millisecond // a heartbeat every 100 ms
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hold, _ := server.HoldFrom(r.Context())
		tx, err := pool.Begin(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		resp := &server.Response{Status: http.StatusCreated, Body: []byte("done")}
		if err := s.CompleteTx(r.Context(), tx, hold, resp); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		time.Sleep(lease) // a heartbeat or two wait on the row meanwhile
		if err := tx.Commit(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		time.Sleep(lease / 2) // and one falls after the commit, before the handler returns
		write(w, resp)
	})
	in := newInstance(t, server.Options{Store: s, Lease: lease}, h)
	got := in.post("k-hb", `{}`)
	require.Equal(t, http.StatusCreated, got.Status)
	assert.True(t, in.post("k-hb", `{}`).Replayed())
	assert.Equal(t, 1, in.obs.Count("stored"))
	assert.Zero(t, in.obs.Count("lease-lost"), "the handler's own completion was reported as a lost lease")
}

// CompleteSQLTx does the same in a database/sql transaction (pgx's stdlib driver): the
// business row and the response commit together, or neither does.
func TestCompleteSQLTx(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	s := openStore(t, pool, pgstore.Options{Schema: schema})
	payments(t, pool, schema)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	insert := `INSERT INTO ` + pgx.Identifier{schema}.Sanitize() + `.payments (ref, amount) VALUES ($1, 1)`
	for _, commit := range []bool{true, false} {
		ref := fmt.Sprintf("sql-%v", commit)
		sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: ref}
		cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
		require.NoError(t, err)
		require.True(t, cl.Claimed)
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, insert, ref)
		require.NoError(t, err)
		require.NoError(t, s.CompleteSQLTx(ctx, tx, server.Hold{Scope: sc, Token: cl.Token}, &server.Response{Status: 201, Body: []byte(ref)}))
		if commit {
			require.NoError(t, tx.Commit())
		} else {
			require.NoError(t, tx.Rollback())
		}
		cl, err = s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
		require.NoError(t, err)
		if commit {
			require.Equal(t, server.StateDone, cl.Record.State)
			assert.Equal(t, ref, string(cl.Record.Response.Body))
			assert.Equal(t, 1, paymentCount(t, pool, schema, ref))
		} else {
			assert.Equal(t, server.StateInProgress, cl.Record.State)
			assert.Equal(t, 0, paymentCount(t, pool, schema, ref))
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	err = s.CompleteSQLTx(ctx, tx, server.Hold{Scope: server.Scope{Key: "never-claimed"}, Token: "1"}, &server.Response{Status: 201})
	assert.ErrorIs(t, err, server.ErrLeaseLost)
}
