package consumer

import "github.com/idem-go/idem/server/internal/lease"

// SetLeaseClock makes p's claims read clock for their send times and keepers. Call it
// before p processes a message.
func SetLeaseClock(p *Processor, clock lease.Clock) { p.clock = clock }
