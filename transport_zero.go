// This file makes the zero Transport usable, as net/http's zero Transport
// is: the first call sets it up as NewTransport(nil, nil) would, once, safely
// for concurrent first calls.

package idem

// setup gives a zero Transport the default Options and no journal, on its
// first call; a Transport from NewTransport is left as it is.
func (t *Transport) setup() {
	t.zero.Do(func() {
		if t.cfg != nil {
			return // built by NewTransport
		}
		cfg, err := (*Options)(nil).config()
		if err != nil { // zero Options mean the defaults, which are valid
			panic("idem: default Options: " + err.Error())
		}
		t.cfg, t.budget, t.own = cfg, newBudget(cfg.RetryBudget), defaultBase()
		if t.clock == nil { // a test may have set its own
			t.clock = newStepClock(realClock{})
		}
	})
}
