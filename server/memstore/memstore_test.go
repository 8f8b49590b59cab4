// memstore_test.go runs the conformance suite against the in-memory Store, on a fake clock.

package memstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/servertest"
)

func TestConformance(t *testing.T) {
	var clocks sync.Map // *memstore.Store -> *servertest.Clock
	servertest.Run(t, servertest.Config{
		Open: func(testing.TB) server.Store {
			c := servertest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := memstore.New(&memstore.Options{Now: c.Now})
			clocks.Store(s, c)
			return s
		},
		Advance: func(s server.Store, d time.Duration) {
			c, _ := clocks.Load(s)
			c.(*servertest.Clock).Advance(d)
		},
	})
}

// The suite also passes on the real clock, as it runs for Redis and PostgreSQL.
func TestConformanceRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for real leases")
	}
	servertest.Run(t, servertest.Config{
		Open:      func(testing.TB) server.Store { return memstore.New(nil) },
		RealLease: 100 * time.Millisecond,
	})
}

// S38 through the middleware and the consumer: replies lost after the Store acted.
func TestS38LostReplies(t *testing.T) {
	servertest.LostReplies(t, servertest.Config{Open: func(testing.TB) server.Store { return memstore.New(nil) }})
}

// S40: each way a handler ends, with and without Recover.
func TestS40Outcomes(t *testing.T) {
	servertest.Outcomes(t, servertest.Config{Open: func(testing.TB) server.Store { return memstore.New(nil) }})
}
