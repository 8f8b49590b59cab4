// conformance_test.go runs the server.Store conformance suite against the real
// PostgreSQL, on the database's clock: every subtest gets a Store in a schema of its own.

package pgstore_test

import (
	"testing"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/idem-go/idem/server/servertest"
)

func TestConformance(t *testing.T) {
	pool := testPool(t)
	servertest.Run(t, servertest.Config{Open: func(t testing.TB) server.Store {
		return openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
	}})
}
