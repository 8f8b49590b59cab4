// This file holds the per-call options, which travel in a request's context
// through any *http.Client, wrapper or SDK that builds the request with it.
// They are not journaled: a later Resume uses Options, or WithMaxAttempts,
// WithAttemptTimeout and WithReconcile on its own context.

package idem

import (
	"context"
	"fmt"
	"time"
)

type ctxKey int

const (
	keyCtx ctxKey = iota
	opIDCtx
	noJournalCtx
	maxAttemptsCtx
	attemptTimeoutCtx
	reconcileCtx
)

// WithKey returns a context that makes the request use idempotency key k
// instead of a generated one. The key is validated by RoundTrip (see
// ErrInvalidKey); it also makes a request with an idempotent method journaled.
func WithKey(ctx context.Context, k string) context.Context {
	return context.WithValue(ctx, keyCtx, k)
}

// WithOperationID returns a context that binds the request to the caller's
// business operation id (for example "order-4827/charge"). Calls with the same
// id, in this process or after a restart, reuse one idempotency key and journal
// record; a different request under the same id (method, journaled URL, body:
// Options.SensitiveQueryParams do not count) fails with ErrKeyReuse. A call
// that sends a still-pending operation again is a retry for the RetryBudget.
func WithOperationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, opIDCtx, id)
}

// WithoutJournal returns a context whose requests are never written to the
// journal, whatever their method (a body that must not touch the disk, or is
// too large to journal); they are retried as unjournaled requests. A method
// in Options.Methods still gets an idempotency key (WithKey's, or a random
// one), the same on every attempt but kept in memory only: if the process
// dies, nothing resumes it. A body over Options.MaxBodyBytes is sent once,
// without retries. With WithOperationID, RoundTrip fails with
// ErrInvalidRequest.
func WithoutJournal(ctx context.Context) context.Context {
	return context.WithValue(ctx, noJournalCtx, true)
}

// WithMaxAttempts returns a context that allows n attempts (the first
// included) for calls made with it, instead of Options.MaxAttempts. n below 1
// makes RoundTrip fail with ErrInvalidRequest before anything is written or
// sent.
func WithMaxAttempts(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, maxAttemptsCtx, n)
}

// WithAttemptTimeout returns a context that bounds each attempt of calls made
// with it to d, until the response headers arrive, instead of
// Options.AttemptTimeout. It is separate from the context's own deadline,
// which bounds the whole call. d not positive makes RoundTrip fail with
// ErrInvalidRequest before anything is written or sent.
func WithAttemptTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, attemptTimeoutCtx, d)
}

// callOptions are what RoundTrip knows of a call before reading its body:
// the request's method and its context's per-call options, read once.
type callOptions struct {
	method    string // "" means GET, as in net/http
	key       string // WithKey's, if hasKey
	hasKey    bool
	opID      string // WithOperationID's, if hasOpID
	hasOpID   bool
	noJournal bool
	limits    limits
	reconcile Reconciler // WithReconcile's or Options.Reconcile; nil for none
}

// callOptionsOf reads the per-call options of ctx, and refuses those that
// make no sense (ErrInvalidRequest).
func (t *Transport) callOptionsOf(ctx context.Context) (callOptions, error) {
	var co callOptions
	co.key, co.hasKey = ctx.Value(keyCtx).(string)
	co.opID, co.hasOpID = ctx.Value(opIDCtx).(string)
	co.noJournal, _ = ctx.Value(noJournalCtx).(bool)
	if co.hasOpID && co.noJournal {
		return co, fmt.Errorf("%w: WithoutJournal with WithOperationID: an operation ID needs the journal", ErrInvalidRequest)
	}
	co.reconcile = t.reconciler(ctx)
	var err error
	co.limits, err = t.cfg.callLimits(ctx)
	return co, err
}

// limits are the attempt limits of one call: Options, overridden per call.
type limits struct {
	maxAttempts    int
	attemptTimeout time.Duration
	// yield, if set, is asked after each attempt that would be retried, and
	// after its backoff wait, whether to leave the operation pending now:
	// Resume frees a slot for another host's operations.
	yield func() bool
}

// callLimits reads WithMaxAttempts and WithAttemptTimeout from ctx over the
// configured defaults, and refuses values that make no sense.
func (c *config) callLimits(ctx context.Context) (limits, error) {
	l := limits{maxAttempts: c.MaxAttempts, attemptTimeout: c.AttemptTimeout}
	if n, ok := ctx.Value(maxAttemptsCtx).(int); ok {
		if n < 1 {
			return l, fmt.Errorf("%w: WithMaxAttempts(%d): want at least 1", ErrInvalidRequest, n)
		}
		l.maxAttempts = n
	}
	if d, ok := ctx.Value(attemptTimeoutCtx).(time.Duration); ok {
		if d <= 0 {
			return l, fmt.Errorf("%w: WithAttemptTimeout(%v): want a positive duration", ErrInvalidRequest, d)
		}
		l.attemptTimeout = d
	}
	return l, nil
}

// WithReconcile returns a context whose calls use r instead of Options.Reconcile; on
// the context given to Resume, it applies to every operation Resume sends.
func WithReconcile(ctx context.Context, r Reconciler) context.Context {
	return context.WithValue(ctx, reconcileCtx, r)
}

// reconciler is the Reconciler for calls made with ctx, or nil.
func (t *Transport) reconciler(ctx context.Context) Reconciler {
	if r, ok := ctx.Value(reconcileCtx).(Reconciler); ok && r != nil {
		return r
	}
	return t.cfg.Reconcile
}
