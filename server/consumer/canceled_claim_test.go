package consumer_test

// canceled_claim_test.go: a consumer whose context ends while its claim is on the wire
// (shutdown, a per-message deadline). The Store may have made the claim before the
// cancellation cut off its reply; the message must not be left claimed by nobody, Busy
// to every redelivery until its record expires.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/consumer"
	"github.com/idem-go/idem/server/memstore"
)

// cutStore makes each claim, then has the caller's context end before the reply arrives,
// as a pgx query or a go-redis command under a deadline does: the claim is made, and the
// caller gets its context's error.
type cutStore struct {
	*memstore.Store
	cancel context.CancelFunc
}

func (s cutStore) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	cl, err := s.Store.Claim(context.WithoutCancel(ctx), sc, token, fp, lease, ttl)
	s.cancel()
	if ctx.Err() != nil {
		return server.Claim{}, ctx.Err()
	}
	return cl, err
}

func TestClaimCutOffByCancellationDoesNotStrandMessage(t *testing.T) {
	store, _ := newStore()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	p := newProcessor(t, consumer.Options{Store: cutStore{store, cancel}})
	var runs atomic.Int32
	handle := func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err // a handler that stops when its consumer stops
		}
		runs.Add(1)
		return nil
	}
	_, _ = p.Process(ctx, "q", "m-1", handle) // the consumer stops mid-claim

	again := newProcessor(t, consumer.Options{Store: store}) // the redelivery, on another consumer
	res, err := again.Process(bg, "q", "m-1", handle)
	require.NoError(t, err)
	require.Contains(t, []string{"processed", "duplicate"}, res.String(),
		"the redelivery is %v: the cut-off claim stranded the message", res)
	require.EqualValues(t, 1, runs.Load())
}
