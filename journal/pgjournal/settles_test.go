package pgjournal

// Tests of the queue of deferred settles (settles.go) under load, races
// with Close, and rows held by another session.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5/pgxpool"
)

// settleLoad runs workers callers that each, until stop is closed, claim,
// create, settle Deferred and release a new operation, as a Transport
// under steady load does. It returns how many operations were settled and
// a func that stops the callers and waits for them.
func settleLoad(t *testing.T, j *Journal, workers int) (count *atomic.Int64, stop func()) {
	t.Helper()
	count = &atomic.Int64{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				rec := pendingRec(t, fmt.Sprintf("load-%d-%d", w, i))
				name := journal.NameOf(rec)
				if err := j.Claim(bg, name); err != nil {
					return
				}
				if err := j.Create(bg, rec); err != nil {
					j.Release(name)
					return
				}
				journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: 201})
				if err := j.Update(bg, rec, journal.Deferred); err != nil {
					j.Release(name)
					return
				}
				j.Release(name)
				count.Add(1)
			}
		})
	}
	var once sync.Once
	return count, func() { once.Do(func() { close(done); wg.Wait() }) }
}

// Flush makes the Updates made before it durable (journal.Store), so it
// must return once those are written, however many settles other callers
// queue meanwhile: writeQueued waits until the queue is empty and no batch
// is under way at one instant, which steady load might never give.
func TestFlushReturnsUnderSteadySettleLoad(t *testing.T) {
	a, _, _ := pair(t)
	n, stop := settleLoad(t, a, 256)
	defer stop()
	time.Sleep(300 * time.Millisecond) // the load runs

	for _, c := range []struct {
		what string
		f    func(context.Context) error
	}{
		{"Flush", a.Flush},
		{"PendingCount", func(ctx context.Context) error { _, err := a.PendingCount(ctx); return err }},
	} {
		ctx, cancel := context.WithTimeout(bg, 3*time.Second)
		start := time.Now()
		err := c.f(ctx)
		cancel()
		if err != nil {
			t.Errorf("%s under steady settle load: %v after %v (%d operations settled so far); want it to return once the settles queued before it are written",
				c.what, err, time.Since(start).Round(time.Millisecond), n.Load())
		} else {
			t.Logf("%s took %v", c.what, time.Since(start).Round(time.Millisecond))
		}
	}
}

// An Update that returned nil is durable after a bounded delay, or after
// Close (journal.Store). One that raced Close (it passed Update's closed
// check, Close then ran and wrote the queue) is written by Update itself,
// or refused with an error: never left in a queue nothing writes.
func TestSettleRacingCloseIsWrittenOrRefused(t *testing.T) {
	pool := testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t)}
	const callers = 16
	for round := range 200 {
		j, err := Open(bg, pool, &opts)
		if err != nil {
			t.Fatal(err)
		}
		recs := make([]*journal.Record, callers)
		for i := range recs {
			recs[i] = pendingRec(t, fmt.Sprintf("close-%d-%d", round, i))
			claimCreate(t, j, recs[i])
			journal.Apply(recs[i], journal.EventSettle, journal.Change{Now: time.Now(), Status: 201})
		}
		var wg sync.WaitGroup
		errs := make([]error, callers)
		start := make(chan struct{})
		for i := range recs {
			wg.Go(func() {
				<-start
				errs[i] = j.Update(bg, recs[i], journal.Deferred)
			})
		}
		close(start)
		cerr := j.Close()
		wg.Wait()
		if cerr != nil {
			t.Fatalf("Close: %v", cerr)
		}
		time.Sleep(3 * settleDelay) // a timer, had one been set, writes now
		for i, rec := range recs {
			if errs[i] != nil {
				continue // refused: the caller knows
			}
			if st := stateInDB(t, j, rec); st != journal.StateSettled {
				j.mu.Lock()
				_, queued := j.queued[journal.NameOf(rec)]
				j.mu.Unlock()
				t.Fatalf("round %d: Update of %s returned nil while Close ran, yet the row is %v after Close (still in the closed Journal's queue: %v)",
					round, rec.OperationID, st, queued)
			}
		}
	}
}

// A settle whose row is held by another session (a stalled statement, an
// overloaded server) does not stop the heartbeat: its renewal skips the
// held row, and Prune's write of the queue is bounded. So another instance
// cannot adopt an operation this one is still sending, and Close returns.
func TestStuckSettleDoesNotStopLeaseRenewal(t *testing.T) {
	pool := testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t), Lease: 3 * time.Second}
	a, b := openTest(t, pool, opts), openTest(t, pool, opts)
	a.settleDelay = time.Hour // only the heartbeat's Prune writes the queue

	sending := pendingRec(t, "sending")
	claimCreate(t, a, sending) // a sends it for the whole test
	settled := pendingRec(t, "settled")
	claimCreate(t, a, settled)
	settleDeferred(t, a, settled, 201)
	a.Release(journal.NameOf(settled))

	unlock := holdRow(t, pool, a, settled) // holds the settled row, as a stuck statement would
	defer unlock()

	time.Sleep(opts.Lease + opts.Lease/2) // the heartbeat ticks 4 times, renewing a's leases
	if b.TryClaim(journal.NameOf(sending)) {
		b.Release(journal.NameOf(sending))
		t.Errorf("b adopted the operation a is sending: a's heartbeat, stuck in Prune's write of a queued settle, renewed no lease for %v", opts.Lease+opts.Lease/2)
	}

	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	select {
	case <-closed:
		unlock()
	case <-time.After(8 * time.Second):
		t.Errorf("Close did not return within 8 s (its own write of the queue is bounded by 5 s): it waits for the heartbeat stuck in Prune")
		unlock()
		<-closed
	}
}

// This Journal reads its queued settles as written (doc.go), whichever
// name finds the row: an operation with an ID and a caller's key, settled
// under its ID, read by its key.
func TestGetByCallerKeySeesQueuedSettle(t *testing.T) {
	a, _, _ := pair(t)
	a.settleDelay = time.Hour
	rec := pendingRec(t, "order-key-alias")
	rec.CallerKey = true
	claimCreate(t, a, rec)
	settleDeferred(t, a, rec, 201)
	a.Release(journal.NameOf(rec))
	got, err := a.Get(bg, journal.Name{Key: rec.Key})
	if err != nil || got == nil {
		t.Fatalf("Get by the caller's key: %+v, %v", got, err)
	}
	if got.State != journal.StateSettled {
		t.Fatalf("Get by the caller's key of an operation whose settle this Journal queued (under its ID) reads it %v, want settled", got.State)
	}
}

// A settle of an operation queued while an earlier settle of it is being
// written waits for that write (one transaction at a time per operation),
// and is then still written within a bounded delay, though the timer fired
// meanwhile and found it busy. (The Transport always claims, and so writes
// the first, before a second settle; a direct Store user need not.)
func TestSettleQueuedWhileItsEarlierIsWrittenIsWrittenSoon(t *testing.T) {
	a, _, pool := pair(t)
	rec := pendingRec(t, "order-twice")
	claimCreate(t, a, rec)

	unlock := holdRow(t, pool, a, rec) // holds the row: the first settle's write waits
	defer unlock()
	if _, err := journal.Apply(rec, journal.EventFail, journal.Change{Now: time.Now(), Error: "refused"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, rec, journal.Deferred); err != nil { // it rides the write-ahead below
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() { created <- a.Create(bg, pendingRec(t, "order-rider")) }()
	waitFor(t, "the first settle's write", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.writing) == 1
	})
	// The same operation made pending and settled again, as a direct Store
	// user may: the record is updated through the journal.State machine.
	second := *rec
	journal.SetRef(&second, journal.RefOf(rec))
	second.State = journal.StateSettled
	second.Status = 201
	second.Updated = time.Now()
	if err := a.Update(bg, &second, journal.Deferred); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * settleDelay) // the timer fires while the first write waits
	unlock()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for stateInDB(t, a, rec) != journal.StateSettled {
		if time.Now().After(deadline) {
			a.mu.Lock()
			q, timer := len(a.queued), a.settleTimer != nil
			a.mu.Unlock()
			t.Fatalf("the second settle was not written 2 s after the first: the row is %v; %d queued, timer set: %v",
				stateInDB(t, a, rec), q, timer)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 5 s", what)
		}
	}
}

// A settle whose row is held (a stuck statement, a lock) does not hold up
// the write-aheads it would ride: the ride's lock wait is cut short, the
// write-aheads are written alone, and the settle is left to be written on
// its own.
func TestStuckSettleDoesNotFailWriteAheads(t *testing.T) {
	pool := testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t), Lease: 2 * time.Second}
	a := openTest(t, pool, opts)
	a.settleDelay = time.Hour // the settle waits for the write-ahead
	settled := pendingRec(t, "held")
	claimCreate(t, a, settled)
	settleDeferred(t, a, settled, 201)
	a.Release(journal.NameOf(settled))

	unlock := holdRow(t, pool, a, settled)
	defer unlock()
	start := time.Now()
	err := a.Create(bg, pendingRec(t, "new"))
	took := time.Since(start)
	if err != nil || took >= opts.Lease {
		t.Fatalf("a Create carrying a held settle: %v after %v; want it written without waiting out its deadline (%v), the settle later",
			err, took.Round(time.Millisecond), opts.Lease)
	}
	unlock()
	if err := a.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if st := stateInDB(t, a, settled); st != journal.StateSettled {
		t.Fatalf("the held settle, once its row was free: %v, want settled", st)
	}
}

// holdRow locks rec's row in a transaction of another session, as a stuck
// statement would hold it, and returns what ends that transaction (once).
func holdRow(t *testing.T, pool *pgxpool.Pool, j *Journal, rec *journal.Record) func() {
	t.Helper()
	tx, err := pool.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	unlock := sync.OnceFunc(func() { tx.Rollback(bg) })
	if _, err := tx.Exec(bg, j.sql(`SELECT 1 FROM {s}.operations WHERE namespace = $1 AND seq = $2 FOR UPDATE`),
		j.opts.Namespace, int64(journal.RefOf(rec).Seq)); err != nil {
		unlock()
		t.Fatal(err)
	}
	return unlock
}

// A ride plans only the settles' UPDATE afresh (customPlan): a generic plan
// cached while the table was small scans the whole table as it grows. The
// write-ahead INSERT it rides with keeps its cached plan, which reads no
// table but namespaces by its key. PostgreSQL counts each prepared
// statement's generic and custom plans per session (pg_prepared_statements),
// so the Journal runs on a pool of one connection and that session is asked.
func TestRidePlansOnlyTheSettlesUpdateAfresh(t *testing.T) {
	open := func(ctx context.Context, url string) (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = 1
		return pgxpool.NewWithConfig(ctx, cfg)
	}
	pool := pgtest.Connect(t, pgtest.URL(), open, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
	j := openTest(t, pool, Options{Schema: testSchema(t, pool), Namespace: namespace(t)})
	j.settleDelay = time.Hour // every settle rides the next write-ahead
	const rides = 12
	for i := range rides + 1 {
		rec := pendingRec(t, fmt.Sprintf("plan-%d", i))
		claimCreate(t, j, rec)
		settleDeferred(t, j, rec, 201)
	}
	if got := j.Stats().Commits; got != rides+1 {
		t.Fatalf("%d commits, want %d: one per write-ahead, each carrying the settle before it", got, rides+1)
	}
	plans := func(like string) (generic, custom int64) {
		t.Helper()
		err := pool.QueryRow(bg, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
			FROM pg_prepared_statements WHERE statement LIKE $1`, like).Scan(&generic, &custom)
		if err != nil {
			t.Fatal(err)
		}
		return generic, custom
	}
	if generic, custom := plans(`UPDATE %.operations o%SET state = %`); generic != 0 || custom < rides {
		t.Errorf("the settles' UPDATE: %d generic and %d custom plans, want none generic and at least %d custom", generic, custom, rides)
	}
	if generic, _ := plans(`INSERT INTO %.operations%unnest%`); generic == 0 {
		t.Error("the write-ahead INSERT was planned afresh every time; want it to keep its cached (generic) plan")
	}
}
