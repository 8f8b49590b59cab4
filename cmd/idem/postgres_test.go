package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// testPostgres returns the URL of the test server (IDEM_POSTGRES_URL, by
// default the local one) with a password the server's trust auth ignores,
// to check it is never printed, and a fresh schema dropped when t ends. It
// fails the test when CI is set and skips it otherwise if the server does
// not answer.
func testPostgres(t *testing.T) (journalURL string, pool *pgxpool.Pool) {
	t.Helper()
	base := os.Getenv("IDEM_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres:s3cret-pw@127.0.0.1:5432/test?sslmode=disable"
	}
	pool = pgtest.Connect(t, base, pgxpool.New, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
	schema := pgtest.Schema(t, "idem_cmd_test_", pool.Exec)
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("schema", schema)
	q.Set("namespace", "payments")
	u.RawQuery = q.Encode()
	return u.String(), pool
}

// pgJournalWithRecords writes one settled and one pending operation to a
// PostgreSQL journal, as an instance of a fleet would, and closes it.
func pgJournalWithRecords(t *testing.T, journalURL string, pool *pgxpool.Pool, server string) {
	t.Helper()
	target, err := parsePostgres(journalURL)
	require.NoError(t, err)
	j, err := pgjournal.Open(context.Background(), pool, &target.opts)
	require.NoError(t, err)
	defer j.Close() // gives its leases up: the command may resume at once
	// A 1 ms backoff makes the pending operation due again at once, for the
	// command's resume.
	tr, err := idem.NewTransport(j, &idem.Options{MaxAttempts: 1, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond})
	require.NoError(t, err)
	for _, op := range []string{"order-1/charge", "order-2/charge"} {
		req, err := http.NewRequestWithContext(idem.WithOperationID(context.Background(), op),
			http.MethodPost, server+"/payments", strings.NewReader(`{"amount":5,"currency":"eur","reference":"`+op+`"}`))
		require.NoError(t, err)
		if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

// The journal commands take a postgres:// URL: ls, show and stats read it
// without a lease, resume sends its pending operation with the journaled key,
// prune deletes what is finished; no output shows the URL's password.
func TestJournalCommandsOnPostgres(t *testing.T) {
	bin := idemBinary(t)
	journalURL, pool := testPostgres(t)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Script(testserver.Fault{}, testserver.Fault{Kind: testserver.FaultStatus, Status: 503})
	var mu sync.Mutex
	var keys []string // of each request, in order
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	pgJournalWithRecords(t, journalURL, pool, front.URL)

	var all strings.Builder
	run := func(args ...string) string {
		t.Helper()
		out, err := runIdem(t, bin, 30*time.Second, args...)
		require.NoError(t, err, out)
		all.WriteString(out)
		return out
	}
	lines := strings.Split(strings.TrimSpace(run("journal", "ls", journalURL)), "\n")
	require.Len(t, lines, 4, lines) // header, two records, count
	require.Contains(t, lines[1], "pending")
	require.Contains(t, lines[1], "order-2/charge")
	require.Contains(t, lines[2], "settled")

	out := run("journal", "show", journalURL, "order-2/charge")
	require.Contains(t, out, `"state": "pending"`)
	require.Contains(t, out, `\"reference\":\"order-2/charge\"`, "show prints the body")

	var s journalSummary
	require.NoError(t, json.Unmarshal([]byte(run("journal", "stats", "-json", journalURL)), &s))
	require.Equal(t, map[string]int{"pending": 1, "settled": 1, "expired": 0, "failed": 0}, s.States)
	require.Equal(t, "order-2/charge", s.OldestPending.OperationID)
	require.Contains(t, s.File, `namespace "payments"`)
	require.Contains(t, run("journal", "stats", journalURL), "journal       postgres://postgres@")

	out = run("journal", "resume", journalURL)
	require.Contains(t, out, "resumed 1: 1 settled")
	mu.Lock()
	require.Len(t, keys, 3)
	require.Equal(t, keys[1], keys[2], "resume sends the journaled key")
	mu.Unlock()
	require.Equal(t, map[string]int{"order-1/charge": 1, "order-2/charge": 1}, srv.Ledger().Effects)

	require.Contains(t, run("journal", "prune", "-retention", "1ns", "-force", journalURL), "pruned 2 record(s)")
	require.Contains(t, run("journal", "ls", journalURL), "0 record(s)")
	require.NotContains(t, all.String(), "s3cret", "a password never shows")
}

// A URL naming a schema without a journal, a server that does not answer,
// and a malformed URL each fail with a message, creating nothing.
func TestJournalCommandsOnPostgresRefuseBadTargets(t *testing.T) {
	bin := idemBinary(t)
	journalURL, pool := testPostgres(t)
	for _, sub := range []string{"ls", "stats", "prune", "resume"} {
		out, err := runIdem(t, bin, 30*time.Second, "journal", sub, journalURL)
		require.Error(t, err, out)
		require.Contains(t, out, "no journal tables", sub)
	}
	u, _ := url.Parse(journalURL)
	var exists bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, u.Query().Get("schema")).Scan(&exists))
	require.False(t, exists, "no command creates the schema")

	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", "postgres://postgres@127.0.0.1:1/test?sslmode=disable")
	require.Error(t, err)
	require.Contains(t, out, "connect")
	out, err = runIdem(t, bin, 30*time.Second, "journal", "ls", "postgres://postgres@127.0.0.1:5432/test?sslmode=bogus")
	require.Error(t, err)
	require.Contains(t, out, "journal URL")
}

// A misspelt namespace is refused by every subcommand, naming the
// namespaces there are, instead of reading as a journal with nothing
// pending; none of them creates it.
func TestJournalCommandsOnPostgresRefuseUnknownNamespace(t *testing.T) {
	bin := idemBinary(t)
	journalURL, pool := testPostgres(t)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	pgJournalWithRecords(t, journalURL, pool, srv.URL)
	typo := strings.Replace(journalURL, "namespace=payments", "namespace=paymnts", 1)
	require.NotEqual(t, journalURL, typo)
	for _, args := range [][]string{{"ls"}, {"ls", "-state", "pending"}, {"stats"}, {"stats", "-json"},
		{"show", "order-2/charge"}, {"prune"}, {"resume"}} {
		args := append([]string{"journal", args[0], typo}, args[1:]...)
		out, err := runIdem(t, bin, 30*time.Second, args...)
		require.Error(t, err, "%v:\n%s", args, out)
		require.Contains(t, out, `namespace "paymnts": no such namespace`, args)
		require.Contains(t, out, `the namespaces in schema idem_cmd_test_`, args)
		require.Contains(t, out, `: "payments"`, args)
		require.NotContains(t, out, "s3cret", "a password never shows")
	}
	rows, err := pool.Query(context.Background(), `SELECT namespace FROM `+
		pgx.Identifier{pgSchemaOf(t, journalURL)}.Sanitize()+`.namespaces`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"payments"}, names, "no subcommand creates the namespace it was given")

	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", journalURL) // spelt right
	require.NoError(t, err, out)
	require.Contains(t, out, "2 record(s)")
}

// pgSchemaOf returns the schema a journal URL names.
func pgSchemaOf(t *testing.T, journalURL string) string {
	t.Helper()
	u, err := url.Parse(journalURL)
	require.NoError(t, err)
	return u.Query().Get("schema")
}
