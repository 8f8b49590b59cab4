// claim_race_test.go checks Claim's second round trip: a row committed by a concurrent
// claim after the claiming statement took its snapshot is invisible to that statement, so
// Claim must read it again rather than report nothing or claim over it.

package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

func TestClaimSeesRowCommittedMeanwhile(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	s := openStore(t, pool, pgstore.Options{Schema: schema})
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: "k"}

	// Another instance's claim, in flight: its row inserted, not yet committed.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema}.Sanitize()+`.server_records
		(scope, fingerprint, token, lease_until, expires_at)
		VALUES ($1, 'fp-other', 'other-holder', now() + interval '1 minute', now() + interval '1 hour')`, sc.ID())
	require.NoError(t, err)

	type result struct {
		cl  server.Claim
		err error
	}
	done := make(chan result, 1)
	go func() {
		cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
		done <- result{cl, err}
	}()
	// The claim's INSERT waits for the other transaction to end (its snapshot is taken).
	eventually(t, 5*time.Second, "the claim waiting on the other insert", func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%ON CONFLICT (scope) DO NOTHING%'
			AND strpos(query, $1) > 0)`, schema).Scan(&waiting))
		return waiting
	})
	require.NoError(t, tx.Commit(ctx))

	select {
	case got := <-done:
		require.NoError(t, got.err)
		assert.False(t, got.cl.Claimed, "claimed over a live record")
		assert.Equal(t, "other-holder", got.cl.Record.Token)
		assert.Equal(t, "fp-other", got.cl.Record.Fingerprint)
		assert.Equal(t, server.StateInProgress, got.cl.Record.State)
	case <-time.After(10 * time.Second):
		t.Fatal("Claim did not return after the other transaction committed")
	}
}
