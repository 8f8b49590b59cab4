package pgjournal_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/pgjournal"
)

// An operation ID enqueued again with the same body but another caller's
// idempotency key is refused, as a call is (idem.ErrKeyReuse): returning
// the stored record would send the operation under a key the caller did
// not ask for. Without a key of its own, the stored one is returned; and
// one operation's key under another operation ID is refused too.
func TestOutboxEnqueueAgainWithAnotherKey(t *testing.T) {
	pool, schema := fleetPool(t)
	in := newInstance(t, pool, &pgjournal.Options{Schema: schema})
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	keyed := func(ref, key string) *http.Request {
		req := chargeRequest(t, "http://127.0.0.1:1", ref, "100")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		return req
	}
	if _, err := in.ob.EnqueueTx(ctx, tx, keyed("order-k", "key-1")); err != nil {
		t.Fatal(err)
	}
	if got, err := in.ob.EnqueueTx(ctx, tx, keyed("order-k", "key-1")); err != nil || got.Key != "key-1" {
		t.Fatalf("again with the same key: %+v, %v; want the stored record", got, err)
	}
	if got, err := in.ob.EnqueueTx(ctx, tx, keyed("order-k", "")); err != nil || got.Key != "key-1" {
		t.Fatalf("again without a key: %+v, %v; want the stored record", got, err)
	}
	got, err := in.ob.EnqueueTx(ctx, tx, keyed("order-k", "key-2"))
	if !errors.Is(err, journal.ErrNameTaken) {
		t.Fatalf("again with another key: %+v, %v; want journal.ErrNameTaken", got, err)
	}
	if _, err := in.ob.EnqueueTx(ctx, tx, keyed("order-other", "key-1")); !errors.Is(err, journal.ErrNameTaken) {
		t.Fatalf("key-1 under another operation ID: %v; want journal.ErrNameTaken", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A call agrees: the same operation ID with another key is a reuse.
	if _, err := in.tr.RoundTrip(keyed("order-k", "key-2")); !errors.Is(err, idem.ErrKeyReuse) {
		t.Fatalf("a call with another key: %v, want idem.ErrKeyReuse", err)
	}
}
