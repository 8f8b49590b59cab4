// Fleet tests: Transports of several instances share one PostgreSQL
// journal; an instance is a child process (this test binary run again),
// SIGKILLed mid-request, and the survivors finish its operations.

package pgjournal_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-go/idem"
	"github.com/idem-go/idem/internal/childtest"
	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The environment of a worker child: set, the test binary is a worker.
const (
	envWorker    = "IDEM_PGJOURNAL_WORKER"
	envSchema    = "IDEM_PGJOURNAL_SCHEMA"
	envNamespace = "IDEM_PGJOURNAL_NAMESPACE"
	envServer    = "IDEM_PGJOURNAL_SERVER"
	envPayments  = "IDEM_PGJOURNAL_PAYMENTS"
)

// fleetLease is the instances' lease in these tests: the shortest allowed,
// so that adoption after a death comes within about a second.
const fleetLease = time.Second

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(worker())
	}
	os.Exit(m.Run())
}

// worker sends the payments it is told to through idem on the shared
// journal, all at once, and waits to be killed.
func worker() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	j, err := pgjournal.Open(ctx, pool, &pgjournal.Options{Schema: os.Getenv(envSchema),
		Namespace: os.Getenv(envNamespace), Lease: fleetLease})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	tr, err := idem.NewTransport(j, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	client := &http.Client{Transport: tr}
	for _, ref := range strings.Split(os.Getenv(envPayments), ",") {
		go pay(client, os.Getenv(envServer), ref)
	}
	select {} // until SIGKILL
}

// pay sends the payment ref under the operation ID ref.
func pay(client *http.Client, server, ref string) (*http.Response, error) {
	ctx := idem.WithOperationID(context.Background(), ref)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/payments",
		strings.NewReader(`{"amount":1250,"currency":"EUR","reference":"`+ref+`"}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return client.Do(req)
}

// fleetPool connects to the test server (failing under CI, skipping
// otherwise, if it does not answer) and returns a schema of the test's own.
func fleetPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	open := func(ctx context.Context, url string) (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, err
		}
		// A name of its own, for faults_test.go to find its connections by (appName).
		cfg.ConnConfig.RuntimeParams["application_name"] = "idem_fleet_" + uuid.NewString()[:8]
		return pgxpool.NewWithConfig(ctx, cfg)
	}
	pool := pgtest.Connect(t, pgtest.URL(), open, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
	return pool, pgtest.Schema(t, "idem_fleet_", pool.Exec)
}

// S26: three instances share one journal; one is SIGKILLed while its
// requests are in flight and never comes back. The two survivors send its
// operations with the original key and bytes, each exactly once, within
// the lease plus their resume interval.
func TestS26SurvivorsFinishAKilledInstancesOperations(t *testing.T) {
	pool, schema := fleetPool(t)
	opts := &pgjournal.Options{Schema: schema, Namespace: "payments", Lease: fleetLease}
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)

	const n = 12
	refs := make([]string, n)
	holds := make([]testserver.Fault, n)
	for i := range refs {
		refs[i] = fmt.Sprintf("pay-%02d", i)
		holds[i] = testserver.Fault{Kind: testserver.FaultHold, Delay: time.Minute}
	}
	srv.Script(holds...) // the dead instance's requests reach the server, which holds them

	cmd := childtest.Command(context.Background(), "^$", envWorker+"=1", envSchema+"="+schema, envNamespace+"="+opts.Namespace,
		envServer+"="+srv.URL, envPayments+"="+strings.Join(refs, ","))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); srv.Ledger().Requests < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the worker's %d requests did not all reach the server in 30 s: %d did", n, srv.Ledger().Requests)
		}
	}
	childtest.Kill(t, cmd, nil, "the worker", func() string { return "(its stderr is the test's)" })
	killed := time.Now()
	srv.ReleaseHolds() // the held requests now complete: their responses are lost with the worker

	// Two survivors, new instances with identities of their own (S27).
	survivors := []*instance{newInstance(t, pool, opts), newInstance(t, pool, opts)}
	if left, err := survivors[0].j.PendingCount(context.Background()); err != nil || left != n {
		t.Fatalf("after the kill the journal holds %d pending operations (%v), want the dead instance's %d", left, err, n)
	}
	var (
		mu        sync.Mutex
		sentBy    = map[string]int{}
		firstSend time.Time
	)
	for deadline := killed.Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var wg sync.WaitGroup
		for _, in := range survivors {
			wg.Go(func() {
				err := in.tr.Resume(context.Background(), func(o idem.Outcome) {
					if o.Response != nil {
						o.Response.Body.Close()
					}
					mu.Lock()
					defer mu.Unlock()
					if o.Err != nil {
						t.Errorf("resume %s: %v", o.Record.OperationID, o.Err)
						return
					}
					if firstSend.IsZero() {
						firstSend = time.Now()
					}
					sentBy[o.Record.OperationID]++
				})
				if err != nil {
					t.Errorf("Resume: %v", err)
				}
			})
		}
		wg.Wait()
		left, err := survivors[0].j.PendingCount(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d operations still pending 20 s after the kill", left)
		}
	}
	done := time.Since(killed)

	for _, ref := range refs {
		if sentBy[ref] != 1 {
			t.Errorf("%s was resumed %d times by the survivors, want once", ref, sentBy[ref])
		}
	}
	l := srv.Ledger()
	if err := l.Check(refs); err != nil {
		t.Fatal(err)
	}
	if l.Mismatches != 0 {
		t.Fatalf("the server saw %d requests reuse a key with other bytes", l.Mismatches)
	}
	if l.Replays < n {
		t.Fatalf("the server replayed %d stored responses, want %d: the survivors' sends must carry the dead instance's keys", l.Replays, n)
	}
	adoption := firstSend.Sub(killed)
	t.Logf("adoption: first resend %v after the kill, all %d settled after %v (lease %v)", adoption.Round(time.Millisecond), n, done.Round(time.Millisecond), fleetLease)
	if adoption > fleetLease+2*time.Second {
		t.Fatalf("first resend %v after the kill, want within the lease (%v) plus the resume interval", adoption, fleetLease)
	}
}
