package pgjournal_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/pgjournal"
)

// keyCounter is a server that counts, per idempotency key, the requests it
// got and the most it had in flight at once; each takes a few milliseconds,
// so that two senders of one key would overlap.
type keyCounter struct {
	mu              sync.Mutex
	inFlight, total map[string]int
	maxInFlight     int
}

func (k *keyCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	k.mu.Lock()
	k.inFlight[key]++
	k.total[key]++
	k.maxInFlight = max(k.maxInFlight, k.inFlight[key])
	k.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	k.mu.Lock()
	k.inFlight[key]--
	k.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

// Resume passes on three instances over one namespace, at once and twice
// each, send each of 40 enqueued operations exactly once, never two at a
// time.
func TestResumeOnThreeInstancesSendsEachOnce(t *testing.T) {
	pool, schema := fleetPool(t)
	opts := &pgjournal.Options{Schema: schema, Namespace: "race"}
	ins := []*instance{newInstance(t, pool, opts), newInstance(t, pool, opts), newInstance(t, pool, opts)}
	kc := &keyCounter{inFlight: map[string]int{}, total: map[string]int{}}
	srv := httptest.NewServer(kc)
	t.Cleanup(srv.Close)
	const n = 40
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := ins[i%3].ob.EnqueueTx(ctx, tx, chargeRequest(t, srv.URL, fmt.Sprintf("race-%d", i), "100")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, in := range ins {
		for range 2 {
			wg.Go(func() {
				if err := in.tr.Resume(ctx, func(o idem.Outcome) {
					if o.Response != nil {
						o.Response.Body.Close()
					}
				}); err != nil {
					t.Errorf("Resume: %v", err)
				}
			})
		}
	}
	wg.Wait()
	for _, in := range ins { // each instance's settles, queued, reach the table
		if err := in.j.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.maxInFlight != 1 {
		t.Errorf("a key was in flight %d times at once, want 1", kc.maxInFlight)
	}
	for i := range n {
		ref := fmt.Sprintf("race-%d", i)
		rec := outcome(t, ins[0].j, ref)
		if rec == nil || rec.State != journal.StateSettled {
			t.Errorf("%s: %+v, want settled", ref, rec)
			continue
		}
		if kc.total[rec.Key] != 1 {
			t.Errorf("%s was sent %d times, want once", ref, kc.total[rec.Key])
		}
	}
}

// Two instances call with one new operation ID at the same instant, 30
// times: the key is never in flight twice at once. (The Claim of one could
// find no row, the other's Create then write it, and the first's Get find
// it and send it alongside: 5 of 30 rounds overlapped before Get waited
// for the other's lease.) Both calls succeed: the loser of the race for
// the write-ahead goes on with the winner's record, as a second call
// would.
func TestTwoInstancesCallingOneNewOperationNeverOverlap(t *testing.T) {
	pool, schema := fleetPool(t)
	opts := &pgjournal.Options{Schema: schema, Namespace: "calls"}
	a, b := newInstance(t, pool, opts), newInstance(t, pool, opts)
	kc := &keyCounter{inFlight: map[string]int{}, total: map[string]int{}}
	srv := httptest.NewServer(kc)
	t.Cleanup(srv.Close)
	for i := range 30 {
		var wg sync.WaitGroup
		for _, in := range []*instance{a, b} {
			wg.Go(func() {
				resp, err := in.tr.RoundTrip(chargeRequest(t, srv.URL, fmt.Sprintf("call-%d", i), "100"))
				if err != nil {
					t.Errorf("call-%d: %v", i, err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.maxInFlight != 1 {
		t.Fatalf("a key was in flight %d times at once, want 1", kc.maxInFlight)
	}
	if len(kc.total) != 30 {
		t.Fatalf("%d keys reached the server, want 30 (one per operation)", len(kc.total))
	}
}
