//go:build linux

// S42 for the fleet journal: an instance whose link to PostgreSQL is cut one
// way (its statements arrive and commit but the replies are lost, or its
// statements are dropped) for longer than its lease, by a real network fault
// (internal/netfault), while another instance adopts its pending operations;
// then the link heals.

package pgjournal_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/internal/netfault"
	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// oneWayCut is how long the link stays cut, in leases: the cut-off
// instance's leases run out, and the other instance adopts its operations.
const oneWayCut = 3

// S42: the cut-off instance has payments in flight at the server when the
// link is cut, gets their answers during the cut (its settles unconfirmed),
// and is asked for more payments during the cut. The other instance adopts
// what is left pending once the leases run out. After the heal, the
// cut-off instance's late settles arrive and change nothing (the row's epoch
// fences them): the adopter's records stand; a Resume on the healed instance
// alone leaves nothing pending; every payment journaled is settled with
// exactly one effect on the server's ledger (none for one never journaled);
// and the healed instance pays again.
func TestS42OneWayPartitionFromPostgreSQL(t *testing.T) {
	for _, cut := range []string{"Replies", "Out"} {
		t.Run(cut, func(t *testing.T) {
			t.Parallel()
			oneWayJournal(t, cut)
		})
	}
}

func oneWayJournal(t *testing.T, cut string) {
	pool, schema := fleetPool(t)
	link, linked := poolOverLink(t)
	a := newInstance(t, linked, &pgjournal.Options{Schema: schema, Namespace: "payments", Lease: fleetLease})
	b := newInstance(t, pool, &pgjournal.Options{Schema: schema, Namespace: "payments", Lease: fleetLease})
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)

	inFlight, during, after := paymentRefs("inflight", 6), paymentRefs("during", 4), paymentRefs("after", 2)
	for range inFlight {
		srv.Script(testserver.Fault{Kind: testserver.FaultHold, Delay: time.Minute})
	}
	var (
		mu   sync.Mutex
		errs = map[string]error{}
		wg   sync.WaitGroup
	)
	pay := func(refs []string) {
		wg.Go(func() {
			got := payAll(t, a, srv.URL, refs, len(refs))
			mu.Lock()
			defer mu.Unlock()
			for ref, err := range got {
				errs[ref] = err
			}
		})
	}
	pay(inFlight)
	for deadline := time.Now().Add(10 * time.Second); srv.Ledger().Requests < len(inFlight); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the in-flight payments did not reach the server in 10 s: %d did", srv.Ledger().Requests)
		}
	}

	map[string]func(){"Replies": link.CutReplies, "Out": link.CutOutward}[cut]()
	cutAt := time.Now()
	pay(during) // its statements go out on open connections, and wait for replies
	time.Sleep(fleetLease / 5)
	srv.ReleaseHolds() // their answers reach the cut-off instance; its settles cannot be confirmed
	adopted, firstAdopted := 0, time.Duration(0)
	settledBy := map[string]idem.Record{} // what the other instance settled, as it wrote it
	for time.Since(cutAt) < oneWayCut*fleetLease {
		err := b.tr.Resume(context.Background(), func(o idem.Outcome) {
			if o.Response != nil {
				o.Response.Body.Close()
			}
			if o.Err == nil {
				if adopted++; adopted == 1 {
					firstAdopted = time.Since(cutAt).Round(time.Millisecond)
				}
				settledBy[o.Record.OperationID] = *o.Record
			}
		})
		if err != nil {
			t.Errorf("Resume on the other instance during the cut: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	landed := rowsOf(t, pool, schema, "during")
	link.Heal()
	healed := time.Now()
	wg.Wait() // the calls made during the cut end, each with its answer or an error

	for ref, err := range payAll(t, a, srv.URL, after, len(after)) {
		if err != nil {
			t.Errorf("%s, paid through the healed instance: %v", ref, err)
		}
		errs[ref] = err
	}
	settleAll(t, a, srv, append(append(inFlight, during...), after...), errs)
	for ref, want := range settledBy {
		got, err := a.j.Get(context.Background(), journal.Name{OperationID: ref})
		if err != nil {
			t.Fatal(err)
		}
		// The adopter's outcome stands: a late write of the cut-off instance, fenced by
		// the row's epoch, changes nothing (the row keeps microseconds).
		if got == nil {
			t.Errorf("%s, settled by the other instance during the cut, is gone", ref)
		} else if got.State != want.State || got.Attempts != want.Attempts || got.Updated.Sub(want.Updated).Abs() >= time.Microsecond {
			t.Errorf("%s, settled by the other instance during the cut (%v, %d attempts, at %v), is now %v, %d attempts, at %v",
				ref, want.State, want.Attempts, want.Updated, got.State, got.Attempts, got.Updated)
		}
	}
	if adopted == 0 {
		t.Errorf("the other instance adopted nothing during a cut of %d leases", oneWayCut)
	}
	failed := 0
	for _, ref := range append(inFlight, during...) {
		if errs[ref] != nil {
			failed++
		}
	}
	t.Logf("cut %s for %v: the other instance settled %d operations during the cut, the first %v after it; %d of the %d payments asked of the cut-off instance during the cut were written then; %d of its %d calls failed; nothing pending %v after the heal",
		cut, oneWayCut*fleetLease, adopted, firstAdopted, landed, len(during), failed, len(inFlight)+len(during), time.Since(healed).Round(time.Millisecond))
}

// rowsOf counts the journal's rows whose operation ID starts with prefix,
// read without a lease.
func rowsOf(t *testing.T, pool *pgxpool.Pool, schema, prefix string) int {
	t.Helper()
	n := 0
	for rec, err := range pgjournal.Records(context.Background(), pool, &pgjournal.Options{Schema: schema, Namespace: "payments"}, false) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(rec.OperationID, prefix) {
			n++
		}
	}
	return n
}

// poolOverLink returns a pool on the test server whose connections all cross
// a link of their own (netfault), and the link, to cut.
func poolOverLink(t *testing.T) (*netfault.Link, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	link, host, port := pgtest.Link(t, cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, port, nil
	cfg.ConnConfig.DialFunc, cfg.ConnConfig.ConnectTimeout = link.DialContext, 3*time.Second
	// Connections kept open, so that statements sent once the link is cut go out on
	// established connections, as a busy instance's do, rather than wait on a connect.
	cfg.MinConns, cfg.MaxConns = 8, 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return link, pool
}
