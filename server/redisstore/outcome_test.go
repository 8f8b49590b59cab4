// outcome_test.go: S40 on Redis, each way a handler ends (an unexplained 5xx, a declared one,
// a panic before or after writing), with and without a Recover hook.

package redisstore_test

import (
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/servertest"
)

func TestS40Outcomes(t *testing.T) {
	c := newClient(t)
	servertest.Outcomes(t, servertest.Config{
		Open:      func(t testing.TB) server.Store { return newStore(t, c) },
		RealLease: 300 * time.Millisecond,
	})
}
