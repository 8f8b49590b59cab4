package consumer

import (
	"testing"

	"github.com/idem-go/idem/server/internal/lease"
)

// SetLeaseClock makes the Processors New builds until t ends keep their leases on clock.
func SetLeaseClock(t testing.TB, clock lease.Clock) {
	old := leaseClock
	leaseClock = clock
	t.Cleanup(func() { leaseClock = old })
}
