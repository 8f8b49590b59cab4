package pgjournal

import (
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

// A deferred settle is written at once, flushed within
// deferredFlushDelay without anyone asking, and a retry (still pending) is
// never deferred.
func TestDeferredSettleIsFlushedSoon(t *testing.T) {
	a, _, _ := pair(t)
	unflushed := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.unflushed
	}
	rec := pendingRec(t, "order-6")
	claimCreate(t, a, rec)
	if _, err := journal.Apply(rec, journal.EventRetry, journal.Change{Now: time.Now(), Status: 503}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	if unflushed() {
		t.Fatal("a retry, which leaves the operation pending, was deferred")
	}
	if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	if !unflushed() {
		t.Fatal("a deferred settle was committed synchronously")
	}
	if got, err := a.Get(bg, journal.NameOf(rec)); err != nil || got.State != journal.StateSettled {
		t.Fatalf("after the deferred settle: %+v, %v", got, err)
	}
	for deadline := time.Now().Add(10 * time.Second); unflushed(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the deferred settle was not flushed within 10 s")
		}
	}
}
