// outcome_test.go: S40 on PostgreSQL, each way a handler ends (an unexplained 5xx, a declared
// one, a panic before or after writing), with and without a Recover hook; and a handler
// completing in its own transaction that rolls back, which frees the key.

package pgstore_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/idem-go/idem/server/servertest"
)

func TestS40Outcomes(t *testing.T) {
	pool := testPool(t)
	servertest.Outcomes(t, servertest.Config{
		Open: func(t testing.TB) server.Store {
			return openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
		},
		RealLease: 300 * time.Millisecond,
	})
}

// A handler that completes in its own transaction and then rolls it back (a failure after
// CompleteTx, a panic) had no effect: its key is released and the retry runs it again,
// with or without a Recover hook, which is not asked.
func TestS40CompleteTxRolledBack(t *testing.T) {
	for _, panics := range []bool{false, true} {
		for _, withRecover := range []bool{false, true} {
			t.Run(map[bool]string{false: "error", true: "panic"}[panics]+map[bool]string{false: "", true: "/Recover"}[withRecover], func(t *testing.T) {
				pool := testPool(t)
				schema := testSchema(t, pool)
				s := openStore(t, pool, pgstore.Options{Schema: schema})
				payments(t, pool, schema)
				var asked, runs atomic.Int64
				p := &payer{pool: pool, store: s, schema: schema, fail: func() bool {
					if runs.Add(1) > 1 {
						return false
					}
					if panics {
						panic(http.ErrAbortHandler) // the deferred rollback runs
					}
					return true
				}}
				o := server.Options{Store: s}
				if withRecover {
					o.Recover = func(context.Context, server.RecoverInfo) (server.Recovery, error) {
						asked.Add(1)
						return server.Recovery{}, nil
					}
				}
				in := newInstance(t, o, p)
				const body = `{"ref":"order-s40","amount":7}`
				first, err := send(context.Background(), in.srv.URL, "k-s40", body)
				if !panics {
					require.NoError(t, err)
					require.Equal(t, http.StatusInternalServerError, first.Status, "%s", first.Body)
				}
				got := in.post("k-s40", body)
				require.Equal(t, http.StatusCreated, got.Status, "%s", got.Body)
				assert.False(t, got.Replayed())
				assert.Equal(t, 1, paymentCount(t, pool, schema, "order-s40"))
				assert.Zero(t, asked.Load(), "Recover was asked about a transaction that rolled back")
			})
		}
	}
}
