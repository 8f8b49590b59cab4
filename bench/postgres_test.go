package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// The PostgreSQL rows (idem-pg and the floor), their three ratios and
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
	if rows := linesWithPrefix(report, pgRow+" "); len(rows) != len(cfg.conc) {
		t.Errorf("%d rows for %q, want %d:\n%s", len(rows), pgRow, len(cfg.conc), report)
	}
	if rows := linesWithPrefix(report, pgFloorRow+" "); len(rows) != len(cfg.conc) {
		t.Errorf("%d rows for %q, want %d:\n%s", len(rows), pgFloorRow, len(cfg.conc), report)
	}
	if ratios := linesWithPrefix(report, "ratio "+pgRow); len(ratios) != 3 {
		t.Errorf("%d ratio lines for %q, want 3:\n%s", len(ratios), pgRow, report)
	}
	if lines := linesWithPrefix(report, "c=4    "+pgRow); len(lines) != 1 {
		t.Errorf("%d per-operation lines for %q at c=4, want 1:\n%s", len(lines), pgRow, report)
	}
	if strings.Contains(report, "note:") {
		t.Errorf("the report has a note (failed requests):\n%s", report)
	}
}
