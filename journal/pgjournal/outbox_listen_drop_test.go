package pgjournal_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/idem-go/idem/testserver"
)

// Run's LISTEN connection, terminated by the server (pg_terminate_backend,
// as a failover or an idle-session reaper would), is replaced: a commit
// after that still wakes Run, whose poll is an hour.
func TestOutboxRunRecoversItsListenConnection(t *testing.T) {
	pool, schema := fleetPool(t)
	opts := &pgjournal.Options{Schema: schema}
	enqueuer, sender := newInstance(t, pool, opts), newInstance(t, pool, opts)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	woke := runOutbox(t, sender)
	var killed int
	err := pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, appName(pool)).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminating Run's connection: %d terminated, %v; want 1", killed, err)
	}
	select { // the pass after listening again
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not listen again within 10 s of losing its connection")
	}
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enqueuer.ob.EnqueueTx(context.Background(), tx, chargeRequest(t, srv.URL, "after-drop", "400")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("a commit after Run's connection was terminated did not wake it within 10 s")
	}
	if got := outcome(t, sender.j, "after-drop"); got == nil || got.State != journal.StateSettled {
		t.Fatalf("after-drop after the wake-up: %+v, want settled", got)
	}
}
