package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL row and its two ratios, against the local server (or
// IDEM_POSTGRES_URL's): skipped without one, failed under CI.
func TestSmokePostgres(t *testing.T) {
	url := os.Getenv("IDEM_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL at %s: %v (CI is set: the server must run)", url, err)
		}
		t.Skipf("PostgreSQL not reachable at %s (set IDEM_POSTGRES_URL): %v", url, err)
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
	if rows := linesWithPrefix(report, pgRow+" "); len(rows) != len(cfg.conc) {
		t.Errorf("%d rows for %q, want %d:\n%s", len(rows), pgRow, len(cfg.conc), report)
	}
	if ratios := linesWithPrefix(report, "ratio "+pgRow); len(ratios) != 2 {
		t.Errorf("%d ratio lines for %q, want 2:\n%s", len(ratios), pgRow, report)
	}
	if strings.Contains(report, "note:") {
		t.Errorf("the report has a note (failed requests):\n%s", report)
	}
}
