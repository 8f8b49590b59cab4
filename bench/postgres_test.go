package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL rows (idem-pg and the two floors), idem-pg's four ratios and
// their per-operation lines, against the local server (or
// IDEM_POSTGRES_URL's): skipped without one, failed under CI.
func TestSmokePostgres(t *testing.T) {
	url := pgtest.URL()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		pgtest.Unavailable(t, "PostgreSQL at "+url+" (set IDEM_POSTGRES_URL)", err)
	}
	conn.Close(ctx)
	cfg, err := parseFlags([]string{"-c", "1,4", "-d", "100ms", "-rounds", "1", "-resume", "0", "-dir", t.TempDir(), "-postgres", url})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, cfg, &out, testWriter{t}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	report := out.String()
	for _, row := range []string{pgRow, pgFloorRow, pgContractRow} {
		if rows := linesWithPrefix(report, row+" "); len(rows) != len(cfg.conc) {
			t.Errorf("%d rows for %q, want %d:\n%s", len(rows), row, len(cfg.conc), report)
		}
	}
	if ratios := linesWithPrefix(report, "ratio "+pgRow); len(ratios) != 4 {
		t.Errorf("%d ratio lines for %q, want 4:\n%s", len(ratios), pgRow, report)
	}
	if lines := linesWithPrefix(report, "c=4    "+pgRow); len(lines) != 1 {
		t.Errorf("%d per-operation lines for %q at c=4, want 1:\n%s", len(lines), pgRow, report)
	}
	if strings.Contains(report, "note:") {
		t.Errorf("the report has a note (failed requests):\n%s", report)
	}
}

// The contract floor writes pgjournal's row before the POST and keeps it,
// settled, after: the settled record with the status, the body gone, the
// lease given up.
func TestPGContractFloorKeepsSettledRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, schema := testSchema(t, ctx)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "" {
			t.Error("the contract floor sent no Idempotency-Key")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	f, err := newPGContractFloor(ctx, pool, schema, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: f}).Post(srv.URL, "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.Close()
	var state, status int
	var bodyGone, leaseGone bool
	err = pool.QueryRow(ctx, `SELECT state, (record->>'status')::int, body IS NULL, leased_until IS NULL FROM `+
		pgx.Identifier{schema}.Sanitize()+`.operations`).Scan(&state, &status, &bodyGone, &leaseGone)
	if err != nil {
		t.Fatal(err)
	}
	if state != 2 || status != http.StatusCreated || !bodyGone || !leaseGone {
		t.Fatalf("the contract floor's row: state %d, status %d, body gone %v, lease gone %v; want 2, 201, true, true",
			state, status, bodyGone, leaseGone)
	}
}

// The contract floor's record column is pgjournal's for the same record:
// the same JSON, compared as jsonb, for a pending and a settled record.
func TestPGContractRecordColumnIsPGJournals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, schema := testSchema(t, ctx)
	j, err := pgjournal.Open(ctx, pool, &pgjournal.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	body := []byte(`{"amount":100}`)
	rec := &journal.Record{Key: uuid.NewString(), Method: http.MethodPost, URL: "http://127.0.0.1:1/payments",
		Header: http.Header{"Content-Type": {"application/json"}}, ContentType: "application/json",
		Body: body, BodySHA256: journal.BodySum(body)}
	if _, err := journal.Apply(rec, journal.EventCreate, journal.Change{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	same := func(what string) {
		t.Helper()
		want, err := recordColumnOf(rec)
		if err != nil {
			t.Fatal(err)
		}
		var equal bool
		if err := pool.QueryRow(ctx, `SELECT record = $1::jsonb FROM `+pgx.Identifier{schema}.Sanitize()+`.operations WHERE key = $2`,
			string(want), rec.Key).Scan(&equal); err != nil {
			t.Fatal(err)
		}
		if !equal {
			t.Errorf("%s: the contract floor's record column differs from pgjournal's: %s", what, want)
		}
	}
	if err := j.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	same("pending")
	if _, err := journal.Apply(rec, journal.EventSettle, journal.Change{Now: time.Now(), Status: http.StatusCreated}); err != nil {
		t.Fatal(err)
	}
	if err := j.Update(ctx, rec, journal.Durable); err != nil {
		t.Fatal(err)
	}
	rec.Header = nil // a settled record keeps no headers (pgjournal/record.go), as the floor's does not
	same("settled")
}

// testSchema returns a pool to the local PostgreSQL server (or
// IDEM_POSTGRES_URL's) and the name of a schema the test may create,
// dropped when it ends, with the pool; it skips without a server (fails
// under CI).
func testSchema(t *testing.T, ctx context.Context) (*pgxpool.Pool, string) {
	url := pgtest.URL()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		pgtest.Unavailable(t, "PostgreSQL at "+url+" (set IDEM_POSTGRES_URL)", err)
	}
	schema := "idem_bench_test_" + strings.ToLower(rand.Text()[:8])
	t.Cleanup(func() {
		pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		pool.Close()
	})
	return pool, schema
}
