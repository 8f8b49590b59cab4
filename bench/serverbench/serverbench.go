// Package serverbench measures what idem's server middleware (package server)
// costs a service: the bare handler, the middleware over memstore, redisstore
// and pgstore, and beside each store a floor middleware that does the least an
// atomic claim needs (floor*.go). The server runs in a child process (child.go)
// so that its allocation and CPU counters see server work only; this process
// is the load generator (load.go). This file holds Config and Run, the order
// of the phase; report.go prints it.
//
// The bench command calls Run as one of its phases, and dispatches to
// ServeChild when IsChild reports that it was started as the server.
package serverbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"
)

// Config is one run of the server phase. The zero value is not usable:
// Conc, D and Rounds must be set.
type Config struct {
	Conc   []int         // concurrency levels (goroutines sending back to back), one table each
	D      time.Duration // measured window per row and round
	Rounds int           // interleaved rounds; every figure is a median over them
	// Warmup is the unmeasured run before each window; 0 means D/4, within
	// [50ms, 200ms].
	Warmup   time.Duration
	Redis    string // Redis address (host:port) for the two Redis rows; "" skips them
	Postgres string // PostgreSQL URL for the two PostgreSQL rows; "" skips them
	// CPUProfile, if set, is where the child writes a CPU profile of the
	// whole phase, the samples taken within a row's handler (middleware
	// included; net/http's reading of the request is not) labelled with the
	// row (go tool pprof -tagfocus 'row=idem mem'). The labels cost each
	// request an allocation or two, so the figures of such a run are a
	// little off.
	CPUProfile string
}

// maxPGConns bounds the child's one pgxpool, shared by both PostgreSQL rows:
// other pools (the client bench's, a neighbour's) must fit beside it within
// PostgreSQL's max_connections, 100 by default.
const maxPGConns = 32

func (c Config) warmup() time.Duration {
	if c.Warmup > 0 {
		return c.Warmup
	}
	return min(200*time.Millisecond, max(50*time.Millisecond, c.D/4))
}

func (c Config) check() error {
	switch {
	case len(c.Conc) == 0:
		return errors.New("serverbench: no concurrency level")
	case slices.Min(c.Conc) < 1:
		return fmt.Errorf("serverbench: concurrency %v: want positive levels", c.Conc)
	case c.D <= 0:
		return fmt.Errorf("serverbench: window %v: must be positive", c.D)
	case c.Rounds < 1:
		return fmt.Errorf("serverbench: %d rounds: want at least 1", c.Rounds)
	}
	return nil
}

// childConfig is what the parent tells the server child (as JSON in its
// arguments): which stores to open and how many connections to pool.
type childConfig struct {
	Redis      string `json:"redis,omitempty"`
	Postgres   string `json:"postgres,omitempty"`
	RedisConns int    `json:"redis_conns"`
	PGConns    int    `json:"pg_conns"`
	CPUProfile string `json:"cpu_profile,omitempty"` // an absolute path
}

// Run measures every row at every level of cfg.Conc in cfg.Rounds interleaved
// rounds, printing the tables and ratio lines to out and progress notes to
// progress. It starts and stops its own server child; with cfg.Redis or
// cfg.Postgres set, the child's keys and schema are removed before it exits.
func Run(ctx context.Context, cfg Config, out, progress io.Writer) error {
	if err := cfg.check(); err != nil {
		return err
	}
	maxConc := slices.Max(cfg.Conc)
	cc := childConfig{Redis: cfg.Redis, Postgres: cfg.Postgres, RedisConns: max(10, maxConc), PGConns: min(max(4, maxConc), maxPGConns)}
	if cfg.CPUProfile != "" {
		var err error
		if cc.CPUProfile, err = filepath.Abs(cfg.CPUProfile); err != nil {
			return err
		}
	}
	fmt.Fprintf(progress, "serverbench: starting the server child\n")
	srv, err := startChild(ctx, cc)
	if err != nil {
		return err
	}
	defer srv.stop()

	rows := rowsFor(cfg.Redis != "", cfg.Postgres != "")
	load := newLoad(srv, maxConc)
	defer load.close()
	rep := &report{w: out, cfg: cfg, cc: cc, rows: rows}
	rep.header(srv)
	for _, c := range cfg.Conc {
		lvl, err := runLevel(ctx, cfg, load, rows, c, progress)
		if err != nil {
			return err
		}
		rep.level(lvl)
	}
	rep.ratios()
	if err := srv.stop(); err != nil {
		return fmt.Errorf("serverbench: stopping the server child: %w", err)
	}
	return nil
}

// runLevel measures every row at concurrency c, cfg.Rounds times, the row
// order rotated each round so that no row always runs first.
func runLevel(ctx context.Context, cfg Config, load *load, rows []row, c int, progress io.Writer) (*level, error) {
	lvl := &level{conc: c, byRow: make([][]*window, len(rows))}
	// One unmeasured pass over every row first: c connections, the child's
	// heap at its working size, the stores' pools filled, before any window.
	for _, rw := range rows {
		if _, err := load.measure(ctx, rw, c, cfg.warmup(), false); err != nil {
			return nil, err
		}
	}
	for r := range cfg.Rounds {
		fmt.Fprintf(progress, "serverbench: concurrency %d, round %d/%d\n", c, r+1, cfg.Rounds)
		for k := range rows {
			i := (k + r) % len(rows)
			if _, err := load.measure(ctx, rows[i], c, cfg.warmup(), false); err != nil {
				return nil, err
			}
			w, err := load.measure(ctx, rows[i], c, cfg.D, true)
			if err != nil {
				return nil, err
			}
			if w.requests == 0 {
				return nil, fmt.Errorf("serverbench: %s at concurrency %d: no request succeeded: %v", rows[i].name, c, w.firstErr)
			}
			lvl.byRow[i] = append(lvl.byRow[i], w)
		}
	}
	return lvl, nil
}
