package server

import "github.com/idem-go/idem/server/internal/lease"

// SetLeaseClock makes m's lease keepers, and the send times of its claims, read clock.
// Call it before m serves a request.
func SetLeaseClock(m *Middleware, clock lease.Clock) {
	m.leaseConfig.Clock = clock
	m.leaseConfig.Shared = lease.NewShared(clock)
}
