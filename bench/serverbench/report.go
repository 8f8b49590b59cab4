// This file prints the server phase: a header saying what runs where, one
// table per concurrency, then the ratio lines, each the median over rounds of
// the per-round ratio, beside its target. Every line of the phase that holds
// ratios starts with "server ratio " or "server cpu ratio ".

package serverbench

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
	"github.com/idem-go/idem/server"
)

// level is every window at one concurrency: byRow[i][r] is row i in round r.
type level struct {
	conc  int
	byRow [][]*window
}

type report struct {
	w      io.Writer
	cfg    Config
	rows   []row
	names  runNames
	levels []*level
}

func (r *report) printf(format string, args ...any) { fmt.Fprintf(r.w, format, args...) }

func (r *report) header() {
	cfg := r.cfg
	r.printf("\nserver middleware benchmark (bench/serverbench)   %s\n", time.Now().Format("2006-01-02 15:04:05 MST"))
	r.printf("  server     a child process per row (its own heap and counters), HTTP/1.1; %d CPUs on the machine,\n", runtime.NumCPU())
	r.printf("             shared with this process (the load), the other rows' idle children, Redis and PostgreSQL\n")
	r.printf("  handler    bare: decodes the %d-byte JSON payment (encoding/json), answers 201 {\"id\":\"pay_N\"}\n", len(paymentBody))
	r.printf("  idem       server.New(&server.Options{Store: s}), defaults otherwise (TTL %gh, lease %v), s = memstore.New(nil)", server.DefaultTTL.Hours(), server.DefaultLease)
	if cfg.Redis != "" {
		r.printf(",\n             redisstore.Open on a key prefix of the row's own")
	}
	if cfg.Postgres != "" {
		r.printf(",\n             pgstore.Open in a schema of the row's own, on a pool whose sessions start with lock_timeout\n")
		r.printf("             and statement_timeout 2s")
	}
	r.printf("\n")
	r.printf("  floors     each claims the key atomically, runs the handler, stores its answer (status, Content-Type, body),\n")
	r.printf("             replays it to a repeated key and answers 409 while it runs; no fingerprint, lease or recovery.\n")
	r.printf("             mem: a map under one mutex. redis: SET key \"\" NX with the TTL, then SET key answer XX with the TTL.\n")
	r.printf("             pg: INSERT … ON CONFLICT DO NOTHING, then UPDATE (autocommit: two commits, as pgstore makes)\n")
	r.printf("  contract   floors doing the work idem's contract asks too: the key scoped by the hashed credentials,\n")
	r.printf("  floors     method and path; the canonical JSON's fingerprint (server.DefaultFingerprint), 422 on another;\n")
	r.printf("             a token per claim that the completion must match; a lease ending the handler's context; the\n")
	r.printf("             whole answer, every header, stored and replayed. mem: the same map. redis: SET NX of the record,\n")
	r.printf("             then a script setting the answer if the token holds. pg: the INSERT and the UPDATE on the token\n")
	if cfg.Redis == "" {
		r.printf("  redis      rows not run: pass -redis ADDR\n")
	} else {
		r.printf("  redis      %s: a go-redis client per row, PoolSize %d; the run's keys under %q\n", cfg.Redis, cfg.redisConns(), r.names.prefix)
	}
	if cfg.Postgres == "" {
		r.printf("  postgres   rows not run: pass -postgres URL\n")
	} else {
		r.printf("  postgres   a pgxpool per row, MaxConns %d (the three within max_connections); the run's schemas %s_*\n",
			cfg.pgConns(), r.names.schema)
	}
	r.printf("  load       this process: c goroutines posting back to back through net/http (MaxIdleConnsPerHost %d),\n", slices.Max(cfg.Conc))
	r.printf("             a fresh Idempotency-Key per request (crypto/rand.Text); each answer must be a 201, not a replay\n")
	r.printf("  method     per row and round: %v warm-up, then %v measured; %d interleaved round(s), the row order rotating.\n",
		cfg.warmup(), cfg.D, cfg.Rounds)
	r.printf("             Every figure is the median over rounds. req/s, p50, p99: client side. allocs/req and B/req: the\n")
	r.printf("             child's runtime.MemStats Mallocs and TotalAlloc deltas ÷ requests (a GC before each window);\n")
	r.printf("             cpu/req: the child's getrusage user+system time ÷ requests: the server's work alone.\n")
	r.printf("             trips/req: the child's round trips to Redis or PostgreSQL ÷ requests (a go-redis hook: commands\n")
	r.printf("             and pipelines; a pgx tracer: statements, BEGIN and COMMIT included, and batches)\n")
}

func (r *report) level(lvl *level) {
	r.levels = append(r.levels, lvl)
	r.printf("\nserver concurrency %d\n", lvl.conc)
	r.printf("%-21s %9s %9s %9s %11s %9s %9s %10s\n", "row", "req/s", "p50", "p99", "allocs/req", "B/req", "cpu/req", "trips/req")
	for i, rw := range r.rows {
		ws := lvl.byRow[i]
		trips := "-"
		if rw.store != "" {
			trips = fmt.Sprintf("%.2f", harness.Over(ws, func(w *window) float64 { return w.perReq(w.server.Trips) }))
		}
		r.printf("%-21s %9.0f %9s %9s %11.1f %9.0f %9s %10s\n", rw.name,
			harness.Over(ws, (*window).reqPerSec),
			fmtDur(time.Duration(harness.Over(ws, func(w *window) float64 { return float64(w.quantile(0.50)) }))),
			fmtDur(time.Duration(harness.Over(ws, func(w *window) float64 { return float64(w.quantile(0.99)) }))),
			harness.Over(ws, func(w *window) float64 { return w.perReq(w.server.Mallocs) }),
			harness.Over(ws, func(w *window) float64 { return w.perReq(w.server.TotalAlloc) }),
			fmtDur(time.Duration(harness.Over(ws, func(w *window) float64 { return w.perReq(uint64(w.server.CPU)) }))),
			trips)
	}
	for i, rw := range r.rows {
		harness.NoteFailures(r.w, rw.name, lvl.byRow[i], func(w *window) (uint64, error) { return w.errors, w.firstErr })
	}
}

// ratios prints the req/s ratio lines with their targets, then the same
// pairs' server CPU per request as b's ÷ a's, so that, as for req/s, below 1
// means a costs more.
func (r *report) ratios() {
	r.printf("\nserver ratios (x = a ratio: each the median over rounds of the per-round ratio)\n")
	r.printf("%-52s", "")
	for _, lvl := range r.levels {
		r.printf(" %8s", fmt.Sprintf("c=%d", lvl.conc))
	}
	r.printf("   target\n")
	r.pairs("server ratio ", "req/s", func(a, b *window) float64 { return a.reqPerSec() / b.reqPerSec() }, true)
	r.pairs("server cpu ratio ", "cpu/req", func(a, b *window) float64 {
		return b.perReq(uint64(b.server.CPU)) / a.perReq(uint64(a.server.CPU))
	}, false)
	r.printf("  server ratio a ÷ b is a's req/s ÷ b's; server cpu ratio a ÷ b is b's server cpu/req ÷ a's (the\n")
	r.printf("  capacity the same CPUs would give, without the load generator's share): below 1, a costs more.\n")
}

// pairs prints one line per ratioDef whose rows ran: f(a's window, b's)
// paired per round, its median at each level, and the target if withTarget.
func (r *report) pairs(prefix, what string, f func(a, b *window) float64, withTarget bool) {
	for _, d := range ratioDefs {
		a, b := rowIndex(r.rows, d.a), rowIndex(r.rows, d.b)
		if a < 0 || b < 0 {
			continue
		}
		r.printf("%-52s", prefix+d.a+" ÷ "+d.b)
		for _, lvl := range r.levels {
			r.printf(" %7.3fx", harness.Paired(lvl.byRow[a], lvl.byRow[b], f))
		}
		if withTarget && d.target != "" {
			r.printf("   %s", d.target)
		}
		r.printf("\n")
	}
}

// fmtDur prints a duration with about three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d < 100*time.Microsecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
