// This file checks the rest of the contract: claims, the identity key,
// LatestWritten, Close, and the optional parts: damaged storage
// (Config.Damage) and pruning (Pruner).

package journaltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

var storeTests = []subtest{
	{"Claims/TryClaim", testTryClaim},
	{"Claims/ClaimEndsWithContext", testClaimContext},
	{"Claims/ReleaseWakesWaiter", testReleaseWakes},
	{"Claims/OneHolderAtATime", testClaimExclusive},
	{"IdentityKey", testIdentityKey},
	{"LatestWritten", testLatestWritten},
	{"Close/LaterCallsFail", testClose},
	{"Damage/BodyReadsCorrupt", testDamage},
	{"Prune/FinishedOlderThanRetention", testPrune},
	{"Prune/NeverPending", testPruneNeverPending},
	{"Prune/RependOfPrunedIsGone", testPruneRepend},
}

func testTryClaim(t *testing.T, c *Config) {
	s := open(t, c)
	a, b := journal.Name{OperationID: "x"}, journal.Name{Key: "x"}
	if !s.TryClaim(a) {
		t.Fatal("TryClaim of a free name = false")
	}
	if s.TryClaim(a) {
		t.Fatal("TryClaim of a held name = true")
	}
	if !s.TryClaim(b) {
		t.Fatal("TryClaim of a key named like a held operation ID = false: they are different names")
	}
	s.Release(a)
	if !s.TryClaim(a) {
		t.Fatal("TryClaim after Release = false")
	}
	s.Release(a)
	s.Release(b)
}

// done reports whether ch has a value already.
func done(ch chan error) bool {
	select {
	case err := <-ch:
		ch <- err
		return true
	default:
		return false
	}
}

func testClaimContext(t *testing.T, c *Config) {
	s := open(t, c)
	name := journal.Name{OperationID: "x"}
	if err := s.Claim(ctx, name); err != nil {
		t.Fatalf("Claim of a free name: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- s.Claim(cctx, name) }()
	if done(got) {
		t.Fatalf("Claim of a held name returned at once: %v", <-got)
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim of a held name, context canceled: %v, want context.Canceled", err)
	}
	dctx, cancel := context.WithDeadline(ctx, time.Unix(0, 0))
	defer cancel()
	if err := s.Claim(dctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim of a held name, deadline past: %v, want context.DeadlineExceeded", err)
	}
	s.Release(name)
	if !s.TryClaim(name) {
		t.Fatal("a Claim that ended with its context left the name held")
	}
	s.Release(name)
}

func testReleaseWakes(t *testing.T, c *Config) {
	s := open(t, c)
	name := journal.Name{Key: "k"}
	if !s.TryClaim(name) {
		t.Fatal("TryClaim of a free name = false")
	}
	got := make(chan error, 1)
	go func() { got <- s.Claim(ctx, name) }()
	if done(got) {
		t.Fatalf("Claim of a held name returned at once: %v", <-got)
	}
	s.Release(name)
	if err := <-got; err != nil {
		t.Fatalf("Claim after Release: %v", err)
	}
	if s.TryClaim(name) {
		t.Fatal("TryClaim = true while the woken waiter holds the name")
	}
	s.Release(name)
}

func testClaimExclusive(t *testing.T, c *Config) {
	s := open(t, c)
	name := journal.Name{OperationID: "x"}
	var holders atomic.Int32
	var overlap atomic.Bool
	for i, err := range concurrently(16, func(int) error {
		for range 20 {
			if err := s.Claim(ctx, name); err != nil {
				return err
			}
			if holders.Add(1) > 1 {
				overlap.Store(true)
			}
			holders.Add(-1)
			s.Release(name)
		}
		return nil
	}) {
		if err != nil {
			t.Fatalf("claimer %d: %v", i, err)
		}
	}
	if overlap.Load() {
		t.Fatal("two holders of one name at once")
	}
}

func testIdentityKey(t *testing.T, c *Config) {
	s := open(t, c)
	key := bytes.Clone(s.IdentityKey())
	if len(key) != 32 {
		t.Fatalf("IdentityKey is %d bytes, want 32", len(key))
	}
	if bytes.Equal(key, make([]byte, 32)) {
		t.Fatal("IdentityKey is all zeros, want random bytes")
	}
	create(t, s, newRecord(t, "1"))
	if !bytes.Equal(s.IdentityKey(), key) {
		t.Fatal("IdentityKey changed")
	}
	if other := open(t, c); bytes.Equal(other.IdentityKey(), key) {
		t.Fatal("two stores have the same IdentityKey, want one made at random for each")
	}
	if c.Reopen != nil {
		s.reopen()
		if !bytes.Equal(s.IdentityKey(), key) {
			t.Fatal("IdentityKey changed across a reopen: credential tags written before would no longer match")
		}
	}
}

// LatestWritten never reads earlier than a time a record holds, however far
// ahead of the clock it is (a clock set back since).
func testLatestWritten(t *testing.T, c *Config) {
	s := open(t, c)
	if lw := s.LatestWritten(); !lw.IsZero() {
		t.Fatalf("LatestWritten of an empty store = %v, want zero", lw)
	}
	check := func(what string, want time.Time) {
		t.Helper()
		if lw := s.LatestWritten(); lw.Before(want) {
			t.Fatalf("LatestWritten after %s = %v, want at least %v", what, lw, want)
		}
	}
	rec := newRecord(t, "1")
	ahead := now().Add(time.Hour)
	rec.Created, rec.Updated = ahead, ahead
	create(t, s, rec)
	check("Create", ahead)

	rec.Attempts, rec.LastAttempt = 1, ahead.Add(time.Minute)
	update(t, s, rec, journal.Deferred)
	check("a deferred Update", rec.LastAttempt)

	apply(t, rec, journal.EventSettle, journal.Change{Now: ahead.Add(2 * time.Minute), Status: 201})
	update(t, s, rec, journal.Durable)
	check("a durable Update", rec.Updated)
	if c.Reopen != nil {
		s.reopen()
		check("a reopen", rec.Updated)
	}
}

func testClose(t *testing.T, c *Config) {
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	var listed *journal.Record
	for l, err := range s.Pending(ctx, 0) {
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		listed = l
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, journal.ErrClosed) {
			t.Errorf("%s after Close: %v, want an error matching journal.ErrClosed", what, err)
		}
	}
	closed("Create", s.Create(ctx, newRecord(t, "2")))
	_, err := s.Get(ctx, journal.NameOf(rec))
	closed("Get", err)
	_, err = s.Reload(ctx, rec)
	closed("Reload", err)
	_, err = s.Reload(ctx, listed)
	closed("Reload of a listed record", err)
	retry(t, rec, 503)
	closed("Update Deferred", s.Update(ctx, rec, journal.Deferred))
	closed("Update Durable", s.Update(ctx, rec, journal.Durable))
	closed("Flush", s.Flush(ctx))
	_, err = s.PendingCount(ctx)
	closed("PendingCount", err)
	n := 0
	for listed, err := range s.Pending(ctx, 0) {
		n++
		if listed != nil {
			t.Errorf("Pending after Close yielded %s", journal.NameOf(listed))
		}
		closed("Pending", err)
	}
	if n != 1 {
		t.Errorf("Pending after Close yielded %d times, want once, its error", n)
	}
	if err := s.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
		t.Errorf("a second Close: %v, want nil or an error matching journal.ErrClosed", err)
	}
}

// A record not yet settled whose stored body no longer matches its
// BodySHA256 would be sent with other bytes under its key: Get and Reload
// refuse it. Pending, which reads no bodies, still lists it, so that one
// damaged record does not stop a resume of the others.
func testDamage(t *testing.T, c *Config) {
	if c.Damage == nil {
		t.Skip("Config.Damage is nil")
	}
	s := open(t, c)
	rec := create(t, s, newRecord(t, "1"))
	other := create(t, s, newRecord(t, "2"))
	s.Store = c.Damage(t, s.Store, rec)
	if s.Store == nil {
		t.Fatal("Config.Damage returned a nil Store")
	}
	corrupt := func(what string, got *journal.Record, err error) {
		t.Helper()
		if !errors.Is(err, journal.ErrCorrupt) {
			t.Errorf("%s of a record with a damaged body: %v, %v; want an error matching journal.ErrCorrupt", what, got, err)
		}
	}
	got, err := s.Get(ctx, journal.NameOf(rec))
	corrupt("Get", got, err)
	got, err = s.Reload(ctx, rec)
	corrupt("Reload", got, err)
	same(t, "Get of an undamaged record", mustGet(t, s, journal.NameOf(other)), other, withBody)
	if got := names(pending(t, s, 0)); len(got) != 2 {
		t.Errorf("Pending with a damaged record: %v, want both", got)
	}
}

// pruner returns s as a Pruner, or skips t.
func pruner(t *testing.T, s journal.Store) Pruner {
	t.Helper()
	if w, ok := s.(*store); ok {
		s = w.Store // the wrapper has only journal.Store's methods
	}
	p, ok := s.(Pruner)
	if !ok {
		t.Skip("the Store does not implement journaltest.Pruner")
	}
	return p
}

// prune runs Prune and checks how many it deleted.
func prune(t *testing.T, s journal.Store, retention time.Duration, want int) {
	t.Helper()
	n, err := pruner(t, s).Prune(retention)
	if err != nil {
		t.Fatalf("Prune(%v): %v", retention, err)
	}
	if n != want {
		t.Fatalf("Prune(%v) deleted %d records, want %d", retention, n, want)
	}
}

// oldRecord is newRecord created, and last updated, at when.
func oldRecord(t *testing.T, id string, when time.Time) *journal.Record {
	t.Helper()
	rec := newRecord(t, id)
	rec.Created, rec.Updated = when, when
	return rec
}

func testPrune(t *testing.T, c *Config) {
	s := open(t, c)
	pruner(t, s)
	old := now().Add(-48 * time.Hour)
	pend := create(t, s, oldRecord(t, "pending", old))
	recent := create(t, s, oldRecord(t, "settled-recent", old))
	apply(t, recent, journal.EventSettle, journal.Change{Now: now(), Status: 201})
	update(t, s, recent, journal.Deferred)
	var doomed []*journal.Record
	for _, e := range []journal.Event{journal.EventSettle, journal.EventFail, journal.EventExpire} {
		rec := create(t, s, oldRecord(t, e.String(), old))
		apply(t, rec, e, journal.Change{Now: old.Add(time.Minute), Status: 201})
		update(t, s, rec, journal.Deferred) // Prune sees deferred updates too
		doomed = append(doomed, rec)
	}
	prune(t, s, 24*time.Hour, len(doomed))
	same(t, "the pending record", mustGet(t, s, journal.NameOf(pend)), pend, withBody)
	same(t, "the recently settled record", mustGet(t, s, journal.NameOf(recent)), recent, withBody)
	for _, rec := range doomed {
		if got := get(t, s, journal.NameOf(rec)); got != nil {
			t.Errorf("Get of a pruned record (%v) = %v, want nil", rec.State, got)
		}
		if got := reload(t, s, rec); got != nil {
			t.Errorf("Reload of a pruned record (%v) = %v, want nil", rec.State, got)
		}
	}
	if n := count(t, s); n != 1 {
		t.Errorf("PendingCount after Prune = %d, want 1", n)
	}
	// A pruned operation's name is free again.
	for _, rec := range doomed {
		create(t, s, newRecord(t, rec.OperationID[len("op-"):]))
	}
	prune(t, s, 24*time.Hour, 0)
	if c.Reopen != nil {
		s.reopen()
		if got := get(t, s, journal.NameOf(recent)); got == nil {
			t.Error("the recently settled record is gone after a reopen")
		}
		if n := count(t, s); n != 1+len(doomed) {
			t.Errorf("PendingCount after Prune and a reopen = %d, want %d", n, 1+len(doomed))
		}
	}
}

func testPruneNeverPending(t *testing.T, c *Config) {
	s := open(t, c)
	pruner(t, s)
	ancient := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := []*journal.Record{create(t, s, oldRecord(t, "1", ancient)), create(t, s, oldRecord(t, "2", ancient))}
	retry(t, recs[1], 503)
	recs[1].LastAttempt = ancient
	update(t, s, recs[1], journal.Deferred)
	prune(t, s, 0, 0)
	for _, rec := range recs {
		same(t, "a pending record after Prune", mustGet(t, s, journal.NameOf(rec)), rec, withBody)
	}
}

// A failed record pruned while a call was about to send it again: the
// repend fails with ErrGone, and writes nothing.
func testPruneRepend(t *testing.T, c *Config) {
	s := open(t, c)
	pruner(t, s)
	old := now().Add(-48 * time.Hour)
	rec := create(t, s, oldRecord(t, "1", old))
	sent := bytes.Clone(rec.Body)
	apply(t, rec, journal.EventFail, journal.Change{Now: old, Error: "idem: invalid URL"})
	update(t, s, rec, journal.Durable)
	held := mustGet(t, s, journal.NameOf(rec))
	prune(t, s, time.Hour, 1)
	apply(t, held, journal.EventRepend, journal.Change{Now: now(), Body: sent})
	if err := s.Update(ctx, held, journal.Durable); !errors.Is(err, journal.ErrGone) {
		t.Fatalf("Update of a repend after its record was pruned: %v, want an error matching journal.ErrGone", err)
	}
	if n := count(t, s); n != 0 {
		t.Fatalf("PendingCount = %d after a refused repend, want 0", n)
	}
	if got := get(t, s, journal.NameOf(rec)); got != nil {
		t.Fatalf("Get after a refused repend = %s, want nil", fmt.Sprint(got.State))
	}
}
