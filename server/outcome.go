// outcome.go classifies how a handler ended (the table in the package doc): final, no
// effect, or uncertain, from what it declared, what it wrote, and whether it panicked.

package server

// outcome is the Outcome of a handler that wrote rec under d; panicked says it did not
// return. A handler completing in its own transaction (MarkCompleted) is settled apart:
// its record is released if the transaction did not commit.
func (m *Middleware) outcome(rec *recorder, d *decision, panicked bool) Outcome {
	switch declared := d.v.Load(); {
	case declared == decideDiscard:
		// The handler said nothing happened, even if it panicked afterwards.
		return OutcomeNoEffect
	case panicked:
		// A panic may come after an effect (a card charged, then a nil pointer): the
		// middleware cannot tell, so it is never taken to mean "nothing happened".
		return OutcomeUncertain
	case declared == decideStore:
		return OutcomeFinal
	case rec.unreplayable() != "":
		// An answer that was not kept reached the client at least in part: never released.
		return OutcomeFinal
	}
	return m.cfg.Classify(rec.finalStatus())
}
