// repeat.go repeats, in the background, the Store calls whose outcome the middleware did
// not learn (a timeout, a cut connection): the release of a claim whose reply was lost,
// and a completion or release after the handler returned. The loop is internal/lease's
// Repeater; this file reports what became of each call.

package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/idem-go/idem/server/internal/lease"
)

// maxRepeats bounds the calls repeated at once. Past it (a long outage under load), a
// call is given up at once: its record is left to lapse and be recovered (Recover, or 409
// until it expires), as a crashed holder's would be.
const maxRepeats = 10_000

// newRepeater waits at most a quarter of a lease between attempts: once the Store is
// back, a record is settled well within a lease.
func newRepeater(c *config) *lease.Repeater {
	return lease.NewRepeater(maxRepeats, c.StoreTimeout, c.Lease/4,
		func(err error) bool { return errors.Is(err, ErrLeaseLost) })
}

// Shutdown waits, until ctx ends, for the Store calls the middleware is repeating in the
// background (completions, releases, the release of a claim whose reply was lost) to land;
// then it gives up those left, whose records lapse and are recovered like a crashed
// holder's (Recover, or 409 until they expire), and returns ctx's error. Call it after
// http.Server.Shutdown, so that no handler is still running. The Middleware still serves
// afterwards, but repeats nothing: a call without an answer is given up at once.
func (m *Middleware) Shutdown(ctx context.Context) error {
	return m.repeats.Shutdown(ctx)
}

// repeat repeats f, the call named call for r, until it lands (reported as how), is
// refused (ResolvedFenced), or until passes (ResolvedGaveUp); done, if not nil, is settled
// when it ends.
func (m *Middleware) repeat(r *http.Request, call, how string, until time.Time, f func(context.Context) error, done settling) {
	c := m.cfg
	end := func(res lease.Result, err error) {
		switch res {
		case lease.Landed:
			c.Logger.Info("idempotency: a repeated store call landed", "call", call, "resolved", how)
		case lease.Refused:
			how = ResolvedFenced
			c.Logger.Info("idempotency: a repeated store call was refused: another holder has the record, or it is done", "call", call)
		default:
			how = ResolvedGaveUp
			c.Logger.Error("idempotency: a store call got no answer in time; its record is left to lapse and be recovered", "call", call, "err", err)
		}
		c.Observer.StoreResolved(r, call, how)
		done.settle()
	}
	if !m.repeats.Start(r.Context(), until, f, end) {
		end(lease.GaveUp, errors.New("server: too many store calls being repeated"))
	}
}
