// timeout_test.go: every statement the Store runs on the pool carries
// Options.StatementTimeout as its lock and statement timeout, so a row held by a
// service's transaction cannot pile waiting copies onto the pool; and a completion in a
// long transaction judges the record by the database's clock when it runs.

package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// A CompleteTx transaction holds its row; claims of that key from more copies than the
// pool has connections each fail within about the statement timeout, and the pool still
// serves other keys meanwhile.
func TestStatementTimeoutBoundsRowLock(t *testing.T) {
	pool := testPool(t)
	s := openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool), StatementTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	sc, tx := holdRow(t, pool, s)

	n := 2 * int(pool.Config().MaxConns)
	var wg sync.WaitGroup
	errs := make([]error, n)
	took := make([]time.Duration, n)
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a bound for the test, not the Store
			defer cancel()
			_, errs[i] = s.Claim(cctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
			took[i] = time.Since(start)
		})
	}
	other := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: "other"}
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := s.Claim(octx, other, server.NewToken(), "fp", time.Minute, time.Hour)
	assert.NoError(t, err, "the pool was exhausted by copies waiting on the held row")
	wg.Wait()
	for i := range n {
		assert.Error(t, errs[i], "a copy went through a held row")
		assert.Less(t, took[i], 4*time.Second, "a copy waited on the held row")
	}
	require.NoError(t, tx.Commit(ctx))
	cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, server.StateDone, cl.Record.State, "after the commit, copies see the answer")
}

// A transaction begun while its record was live completes it only if it is still live
// when CompleteTx runs: the check reads the database's clock then, not the transaction's
// start time (now()).
func TestCompleteTxJudgesExpiryWhenItRuns(t *testing.T) {
	pool := testPool(t)
	s := openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: "late"}
	token := server.NewToken()
	_, err := s.Claim(ctx, sc, token, "fp", 100*time.Millisecond, 200*time.Millisecond)
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT 1`) // the transaction's now() is taken here
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // the record expires
	err = s.CompleteTx(ctx, tx, server.Hold{Scope: sc, Token: token}, &server.Response{Status: 201})
	assert.ErrorIs(t, err, server.ErrLeaseLost, "an expired record was completed by a transaction begun before its expiry")
}
