// copies_test.go: S31 on PostgreSQL. Two middleware instances (two pools, two loopback
// servers) share one database; concurrent copies of one key sent to both at once run the
// handler exactly once.

package pgstore_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// gate blocks handlers until released, and counts those that entered.
type gate struct {
	entered atomic.Int64
	open    chan struct{}
	once    sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{})}
	t.Cleanup(g.release) // never leave a handler blocked
	return g
}

func (g *gate) wait()    { g.entered.Add(1); <-g.open }
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// countingStore counts the claims the middleware makes (a waiting copy polls).
type countingStore struct {
	server.Store
	claims atomic.Int64
}

func (c *countingStore) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, sc, token, fp, lease, ttl)
}

// pair is two instances of one payments service, each with its own pool and Store on one
// schema, their handlers blocked at one gate.
type pair struct {
	a, b           *instance
	pa, pb         *payer
	ca, cb         *countingStore
	g              *gate
	schema         string
	checkPayments  func(ref string) int
	effects, polls func() int64
}

func newPair(t *testing.T, opts server.Options) *pair {
	t.Helper()
	poolA, poolB := testPool(t), testPool(t)
	p := &pair{g: newGate(t), schema: testSchema(t, poolA)}
	sa := openStore(t, poolA, pgstore.Options{Schema: p.schema})
	sb := openStore(t, poolB, pgstore.Options{Schema: p.schema})
	payments(t, poolA, p.schema)
	p.pa = &payer{pool: poolA, store: sa, schema: p.schema, before: p.g.wait}
	p.pb = &payer{pool: poolB, store: sb, schema: p.schema, before: p.g.wait}
	p.ca, p.cb = &countingStore{Store: sa}, &countingStore{Store: sb}
	oa, ob := opts, opts
	oa.Store, ob.Store = p.ca, p.cb
	p.a, p.b = newInstance(t, oa, p.pa), newInstance(t, ob, p.pb)
	p.checkPayments = func(ref string) int { return paymentCount(t, poolA, p.schema, ref) }
	p.effects = func() int64 { return p.pa.effects.Load() + p.pb.effects.Load() }
	p.polls = func() int64 { return p.ca.claims.Load() + p.cb.claims.Load() }
	return p
}

// sendAll sends n copies of key with body, alternately to a and b, all at once.
func (p *pair) sendAll(t *testing.T, n int, key, body string) (wait func() []answer) {
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		in := p.a
		if i%2 == 1 {
			in = p.b
		}
		wg.Go(func() {
			got, err := send(t.Context(), in.srv.URL, key, body)
			assert.NoError(t, err)
			answers[i] = got
		})
	}
	return func() []answer { wg.Wait(); return answers }
}

const s31Body = `{"ref":"order-s31","amount":1250}`

func TestS31TwoInstancesOnePostgres(t *testing.T) {
	const n = 8

	// Without Wait: one copy runs the handler, the others get 409 with Retry-After from
	// the holder's lease (30 s by default, the database's clock); once it finished, a
	// retry on either instance replays.
	t.Run("Conflict", func(t *testing.T) {
		leakcheck.Check(t)
		p := newPair(t, server.Options{})
		wait := p.sendAll(t, n, "k-s31", s31Body)
		eventually(t, 10*time.Second, "seven 409s", func() bool {
			return p.a.obs.Count("conflict")+p.b.obs.Count("conflict") == n-1
		})
		p.g.release()
		created := 0
		for i, got := range wait() {
			switch got.Status {
			case http.StatusCreated:
				created++
				assert.False(t, got.Replayed())
			case http.StatusConflict:
				assert.Equal(t, "key-in-progress", got.ProblemType(t))
				ra, err := strconv.Atoi(got.Header.Get("Retry-After"))
				assert.NoError(t, err)
				assert.True(t, ra >= 1 && ra <= 30, "Retry-After %d, want the holder's lease left, 1-30 s", ra)
			default:
				t.Errorf("copy %d: %d %s", i, got.Status, got.Body)
			}
		}
		assert.Equal(t, 1, created)
		assert.EqualValues(t, 1, p.g.entered.Load(), "the handler ran more than once")
		assert.EqualValues(t, 1, p.effects())
		assert.Equal(t, 1, p.checkPayments("order-s31"))
		first := p.a.post("k-s31", s31Body)
		for _, got := range []answer{first, p.b.post("k-s31", s31Body)} {
			assert.Equal(t, http.StatusCreated, got.Status)
			assert.True(t, got.Replayed())
			assert.Equal(t, first.Body, got.Body)
		}
	})

	// With Wait: the copies that find the key in progress poll the database and, once the
	// holder's transaction committed, replay its answer byte for byte.
	t.Run("WaitThenReplay", func(t *testing.T) {
		leakcheck.Check(t)
		p := newPair(t, server.Options{Wait: 10 * time.Second})
		wait := p.sendAll(t, n, "k-s31-wait", s31Body)
		eventually(t, 10*time.Second, "the other copies polling", func() bool {
			return p.g.entered.Load() == 1 && p.polls() >= 3*n
		})
		p.g.release()
		answers := wait()
		var first *answer
		for i, got := range answers {
			require.Equal(t, http.StatusCreated, got.Status, "copy %d: %s", i, got.Body)
			if !got.Replayed() {
				require.Nil(t, first, "two copies were not replays")
				first = &answers[i]
			}
		}
		require.NotNil(t, first, "every copy was a replay")
		for _, got := range answers {
			assert.Equal(t, first.Body, got.Body)
			assert.Equal(t, first.Header.Get("Location"), got.Header.Get("Location"))
			assert.Equal(t, first.Header.Get("Content-Type"), got.Header.Get("Content-Type"))
		}
		assert.Equal(t, n-1, p.a.obs.Count("replayed")+p.b.obs.Count("replayed"))
		assert.EqualValues(t, 1, p.g.entered.Load())
		assert.EqualValues(t, 1, p.effects())
		assert.Equal(t, 1, p.checkPayments("order-s31"))
	})
}
