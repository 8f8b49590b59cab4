// Tests of the transactional outbox (S28): a call enqueued in the caller's
// transaction is sent if and only if it commits, exactly once, by any
// instance.

package pgjournal_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// instance is one service instance: a Journal, a Transport over it and its
// Outbox.
type instance struct {
	j  *pgjournal.Journal
	tr *idem.Transport
	ob *pgjournal.Outbox
}

func newInstance(t *testing.T, pool *pgxpool.Pool, opts *pgjournal.Options) *instance {
	t.Helper()
	j, err := pgjournal.Open(context.Background(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	tr, err := idem.NewTransport(j, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &instance{j: j, tr: tr, ob: pgjournal.NewOutbox(j, tr)}
}

// resume sends what is pending, failing t on an outcome with an error.
func (in *instance) resume(t *testing.T) func(context.Context) error {
	return func(ctx context.Context) error {
		return in.tr.Resume(ctx, func(o idem.Outcome) {
			if o.Response != nil {
				o.Response.Body.Close()
			}
			if o.Err != nil {
				t.Errorf("resume %s: %v", o.Record.OperationID, o.Err)
			}
		})
	}
}

// chargeRequest is a payment for ref, under the operation ID ref.
func chargeRequest(t *testing.T, server, ref, amount string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(idem.WithOperationID(context.Background(), ref), http.MethodPost,
		server+"/payments", strings.NewReader(`{"amount":`+amount+`,"currency":"EUR","reference":"`+ref+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

func outcome(t *testing.T, j *pgjournal.Journal, ref string) *journal.Record {
	t.Helper()
	rec, err := j.Get(context.Background(), journal.Name{OperationID: ref})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// S28: one enqueue rolls back and is never sent; another commits, its
// instance dies before sending, and a survivor sends it exactly once.
func TestS28OutboxSendsIfAndOnlyIfCommitted(t *testing.T) {
	pool, schema := fleetPool(t)
	opts := &pgjournal.Options{Schema: schema, Namespace: "orders", Lease: time.Second}
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	enqueuer, survivor := newInstance(t, pool, opts), newInstance(t, pool, opts)

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enqueuer.ob.EnqueueTx(ctx, tx, chargeRequest(t, srv.URL, "rolled-back", "100")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := enqueuer.ob.EnqueueTx(ctx, tx, chargeRequest(t, srv.URL, "committed", "200"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.OperationID != "committed" || rec.State != journal.StatePending {
		t.Fatalf("EnqueueTx returned %s in state %v", rec.OperationID, rec.State)
	}
	if got := outcome(t, survivor.j, "committed"); got != nil {
		t.Fatal("an enqueued operation is visible before its transaction commits")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	enqueuer.j.Close() // the enqueuing instance dies before sending

	for range 2 { // a second pass finds nothing left to send
		if err := survivor.resume(t)(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l := srv.Ledger()
	if err := l.Check([]string{"committed"}); err != nil {
		t.Fatal(err)
	}
	if l.Effects["rolled-back"] != 0 || l.Requests != 1 {
		t.Fatalf("ledger %+v: want one request, for the committed operation only", l)
	}
	got := outcome(t, survivor.j, "committed")
	if got == nil || got.State != journal.StateSettled || got.Status != http.StatusCreated || got.Key != rec.Key {
		t.Fatalf("the committed operation's outcome: %+v, want settled 201 under key %s", got, rec.Key)
	}
	if outcome(t, survivor.j, "rolled-back") != nil {
		t.Fatal("the rolled-back operation is in the journal")
	}
}

// Enqueueing an operation ID again with the same request returns the
// stored record; with another, journal.ErrNameTaken, and the transaction
// stays usable. Without an operation ID: ErrNoOperationID.
func TestOutboxEnqueueAgain(t *testing.T) {
	pool, schema := fleetPool(t)
	in := newInstance(t, pool, &pgjournal.Options{Schema: schema})
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	first, err := in.ob.EnqueueTx(ctx, tx, chargeRequest(t, "http://127.0.0.1:1", "order-1", "100"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := in.ob.EnqueueTx(ctx, tx, chargeRequest(t, "http://127.0.0.1:1", "order-1", "100"))
	if err != nil || again.Key != first.Key {
		t.Fatalf("enqueue again, same request: key %v, %v; want the stored key %s", again, err, first.Key)
	}
	if _, err := in.ob.EnqueueTx(ctx, tx, chargeRequest(t, "http://127.0.0.1:1", "order-1", "999")); !errors.Is(err, journal.ErrNameTaken) {
		t.Fatalf("enqueue again, other body: %v, want journal.ErrNameTaken", err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/payments", strings.NewReader("{}"))
	if _, err := in.ob.EnqueueTx(ctx, tx, req); !errors.Is(err, pgjournal.ErrNoOperationID) {
		t.Fatalf("enqueue without an operation ID: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after a refused enqueue: %v", err)
	}
	if n, err := in.j.PendingCount(ctx); err != nil || n != 1 {
		t.Fatalf("%d pending (%v), want 1", n, err)
	}
}

// The database/sql variant, through pgx's stdlib driver.
func TestOutboxSQLTx(t *testing.T) {
	pool, schema := fleetPool(t)
	in := newInstance(t, pool, &pgjournal.Options{Schema: schema})
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	db, err := sql.Open("pgx", pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref := map[bool]string{false: "sql-rolled-back", true: "sql-committed"}[commit]
		if _, err := in.ob.EnqueueSQLTx(ctx, tx, chargeRequest(t, srv.URL, ref, "300")); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := in.resume(t)(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Ledger().Check([]string{"sql-committed"}); err != nil {
		t.Fatal(err)
	}
	if srv.Ledger().Effects["sql-rolled-back"] != 0 {
		t.Fatal("a rolled-back database/sql enqueue was sent")
	}
}

// Run wakes on a commit, not on its poll: with an hour's poll, a committed
// enqueue is sent at once, and it keeps listening after a poll timed out.
func TestOutboxRunWakesOnCommit(t *testing.T) {
	pool, schema := fleetPool(t)
	opts := &pgjournal.Options{Schema: schema}
	enqueuer, sender := newInstance(t, pool, opts), newInstance(t, pool, opts)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	woke := runOutbox(t, sender)
	for i, ref := range []string{"woken-1", "woken-2"} {
		tx, err := pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := enqueuer.ob.EnqueueTx(context.Background(), tx, chargeRequest(t, srv.URL, ref, "400")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-woke:
		case <-time.After(10 * time.Second):
			t.Fatalf("commit %d did not wake Run within 10 s (its poll is an hour)", i+1)
		}
		if got := outcome(t, sender.j, ref); got == nil || got.State != journal.StateSettled {
			t.Fatalf("%s after the wake-up: %+v, want settled", ref, got)
		}
	}
}

// runOutbox runs in's Outbox.Run, with an hour's poll, until t ends, and
// returns a channel that receives after each of its sends; the first (at
// once, before any commit) has been received already.
func runOutbox(t *testing.T, in *instance) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	woke := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- in.ob.Run(ctx, time.Hour, func(ctx context.Context) error {
			err := in.resume(t)(ctx)
			woke <- struct{}{}
			return err
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	<-woke // the first pass, at once
	return woke
}
