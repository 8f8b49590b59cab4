// Faults of the database itself (S29): connections dropped under load,
// PostgreSQL restarted mid-run, and a primary that turned read-only. Calls
// fail cleanly or wait; nothing is sent before its write-ahead committed;
// nothing pending is lost, and work resumes when the database is back.

package pgjournal_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// payAll sends the payments refs through in, conc at a time, each with a
// bounded context, and returns each call's error (nil: answered).
func payAll(t *testing.T, in *instance, server string, refs []string, conc int) map[string]error {
	t.Helper()
	var (
		mu   sync.Mutex
		errs = map[string]error{}
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range conc {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(refs)); i = next.Add(1) - 1 {
				req := chargeRequest(t, server, refs[i], "500")
				ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
				req = req.WithContext(ctx)
				resp, err := (&http.Client{Transport: in.tr}).Do(req)
				if resp != nil {
					resp.Body.Close()
				}
				cancel()
				mu.Lock()
				errs[refs[i]] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// settleAll resumes until nothing is pending (bounded), then checks the
// invariants: an operation never written was never sent, and every one
// written has exactly one effect on the server, with its own bytes.
func settleAll(t *testing.T, in *instance, srv *testserver.Server, refs []string, errs map[string]error) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err := in.resume(t)(ctx); err != nil {
			t.Logf("resume: %v (tried again)", err)
		}
		n, err := in.j.PendingCount(ctx)
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d pending (%v) 45 s after the faults", n, err)
		}
	}
	l := srv.Ledger()
	failed, unwritten := 0, 0
	for _, ref := range refs {
		rec, err := in.j.Get(ctx, journal.Name{OperationID: ref})
		if err != nil {
			t.Fatal(err)
		}
		if errs[ref] != nil {
			failed++
		}
		switch {
		case rec == nil:
			unwritten++
			if l.Effects[ref] != 0 {
				t.Errorf("%s: never journaled, yet the server has %d effects of it (call: %v)", ref, l.Effects[ref], errs[ref])
			}
		case rec.State != journal.StateSettled || l.Effects[ref] != 1:
			t.Errorf("%s: %v with %d effects, want settled with one (call: %v)", ref, rec.State, l.Effects[ref], errs[ref])
		}
	}
	if l.Mismatches != 0 {
		t.Errorf("the server saw %d keys reused with other bytes", l.Mismatches)
	}
	t.Logf("%d payments: %d calls failed (%d never journaled, so never sent), the rest settled once", len(refs), failed, unwritten)
}

func paymentRefs(prefix string, n int) []string {
	refs := make([]string, n)
	for i := range refs {
		refs[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return refs
}

// S29: the pool's connections are all killed, again and again, while
// payments go through.
func TestS29DroppedConnections(t *testing.T) {
	pool, schema := fleetPool(t)
	in := newInstance(t, pool, &pgjournal.Options{Schema: schema, Lease: time.Second})
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	admin := adminPool(t)

	stop := make(chan struct{})
	var killed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			tag, err := admin.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = $1`, appName(pool))
			if err == nil {
				killed.Add(tag.RowsAffected())
			}
		}
	})
	refs := paymentRefs("dropped", 60)
	errs := payAll(t, in, srv.URL, refs, 4)
	close(stop)
	wg.Wait()
	t.Logf("%d backends terminated during the run", killed.Load())
	if killed.Load() == 0 {
		t.Fatal("no connection was dropped: the test tested nothing")
	}
	settleAll(t, in, srv, refs, errs)
}

// S29: PostgreSQL restarts mid-run (pg_ctlcluster, as root on a Debian
// cluster, and only when IDEM_PG_RESTART=1 says the local server may be
// restarted, as .ci/run does; skipped otherwise).
func TestS29Restart(t *testing.T) {
	restart := restartCommand(t)
	pool, schema := fleetPool(t)
	in := newInstance(t, pool, &pgjournal.Options{Schema: schema, Lease: time.Second})
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)

	refs := paymentRefs("restart", 40)
	var errs map[string]error
	done := make(chan struct{})
	go func() {
		defer close(done)
		errs = payAll(t, in, srv.URL, refs, 2)
	}()
	for deadline := time.Now().Add(20 * time.Second); srv.Ledger().Requests < 5 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("restart PostgreSQL: %v: %s", err, out)
	}
	<-done
	settleAll(t, in, srv, refs, errs)
}

// S29: the primary turns read-only (SQLSTATE 25006): every write-ahead
// fails and nothing is sent; once writable again, calls go through.
func TestS29ReadOnly(t *testing.T) {
	_, schema := fleetPool(t)
	var readOnly atomic.Bool
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if readOnly.Load() {
			_, err := c.Exec(ctx, `SET default_transaction_read_only = on`)
			return err
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	in := newInstance(t, pool, &pgjournal.Options{Schema: schema, Lease: time.Second})
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)

	readOnly.Store(true)
	pool.Reset() // the failover: every new connection finds a read-only server
	refs := paymentRefs("readonly", 6)
	errs := payAll(t, in, srv.URL, refs, 2)
	for _, ref := range refs {
		if errs[ref] == nil || !strings.Contains(errs[ref].Error(), "25006") {
			t.Fatalf("%s on a read-only primary: %v, want the write-ahead's SQLSTATE 25006", ref, errs[ref])
		}
	}
	if n := srv.Ledger().Requests; n != 0 {
		t.Fatalf("the server got %d requests while no write-ahead could commit", n)
	}

	readOnly.Store(false)
	pool.Reset() // writable again
	more := paymentRefs("writable", 6)
	for ref, err := range payAll(t, in, srv.URL, more, 2) {
		if err != nil {
			t.Fatalf("%s once writable: %v", ref, err)
		}
	}
	settleAll(t, in, srv, append(refs, more...), errs)
}

// adminPool is a pool apart from the one under test, to kill its
// connections.
func adminPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// appName is the application_name pool's connections report, set so that
// adminPool kills only them.
func appName(pool *pgxpool.Pool) string {
	return pool.Config().ConnConfig.RuntimeParams["application_name"]
}

// restartCommand returns the command that restarts the local Debian
// PostgreSQL cluster, or skips t where there is none to restart.
func restartCommand(t *testing.T) *exec.Cmd {
	t.Helper()
	if os.Getenv("IDEM_PG_RESTART") != "1" || os.Getenv("IDEM_POSTGRES_URL") != "" {
		t.Skip("restarts the local PostgreSQL cluster: set IDEM_PG_RESTART=1 to allow it (and leave IDEM_POSTGRES_URL unset)")
	}
	bin, err := exec.LookPath("pg_ctlcluster")
	versions, _ := filepath.Glob("/etc/postgresql/*/main")
	if err != nil || len(versions) != 1 || os.Geteuid() != 0 {
		t.Skip("no local PostgreSQL cluster this test may restart (pg_ctlcluster, as root)")
	}
	version := filepath.Base(filepath.Dir(versions[0]))
	return exec.Command(bin, "--skip-systemctl-redirect", version, "main", "restart", "-m", "fast")
}
