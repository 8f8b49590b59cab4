// This file holds the per-call options that travel in a request's context.

package idem

import "context"

type ctxKey int

const (
	keyCtx ctxKey = iota
	opIDCtx
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
// record; a different request under the same id fails with ErrKeyReuse.
func WithOperationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, opIDCtx, id)
}

func keyFrom(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyCtx).(string)
	return k, ok
}

func operationIDFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(opIDCtx).(string)
	return id, ok
}
