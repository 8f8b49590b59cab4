// Package serverbench measures what idem's server middleware (package server)
// costs a service: the bare handler, the middleware over memstore, redisstore
// and pgstore, and beside each store a floor middleware that does the least an
// atomic claim needs (floor*.go). Each row's server runs in a child process of
// its own (child.go), so that its allocation and CPU counters, its heap and its
// profile are that row's alone; this process is the load generator (load.go).
// This file holds Config and Run, the order of the phase; report.go prints it.
//
// The bench command calls Run as one of its phases, and dispatches to
// ServeChild when IsChild reports that it was started as the server.
package serverbench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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
	Redis    string // Redis address (host:port) for the Redis rows; "" skips them
	Postgres string // PostgreSQL URL for the PostgreSQL rows; "" skips them
	// CPUProfile, if set, names the CPU profiles of the phase, one per row
	// and written by its child: CPUProfile with "-" and the row's path
	// before its extension (server.pprof: server-idem-mem.pprof; see
	// profilePath).
	CPUProfile string
}

// maxPGConns bounds the pgxpool of each PostgreSQL row's child: the three
// must fit within PostgreSQL's max_connections, 100 by default, with room
// for a neighbour's connections (Run checks there is, checkPGRoom).
const maxPGConns = 30

func (c Config) warmup() time.Duration {
	if c.Warmup > 0 {
		return c.Warmup
	}
	return min(200*time.Millisecond, max(50*time.Millisecond, c.D/4))
}

// checkPGRoom fails, before any child starts, if the PostgreSQL at url has
// fewer connections free than need, the PostgreSQL children's pools: else
// the last of them would fail minutes into the run, at its highest -c.
func checkPGRoom(ctx context.Context, url string, need int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("-postgres: %w", err)
	}
	defer conn.Close(ctx)
	var free int
	if err := conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int - count(*)
		FROM pg_stat_activity WHERE backend_type = 'client backend'`).Scan(&free); err != nil {
		return fmt.Errorf("-postgres: counting its free connections: %w", err)
	}
	if free < need {
		return fmt.Errorf("serverbench: PostgreSQL has %d connections free (max_connections less those in use), "+
			"and the PostgreSQL rows' pools take %d: raise max_connections, or lower -c", free, need)
	}
	return nil
}

// redisConns and pgConns size a child's pool: a connection for every request
// in flight, within maxPGConns for PostgreSQL.
func (c Config) redisConns() int { return max(10, slices.Max(c.Conc)) }
func (c Config) pgConns() int    { return min(max(4, slices.Max(c.Conc)), maxPGConns) }

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

// childConfig is what the parent tells a server child (as JSON in its
// arguments): the row it serves, the store that row needs and how many
// connections to pool.
type childConfig struct {
	Row         string `json:"row"`
	Redis       string `json:"redis,omitempty"`
	RedisPrefix string `json:"redis_prefix,omitempty"` // the child's keys all start with it
	Postgres    string `json:"postgres,omitempty"`
	PGSchema    string `json:"pg_schema,omitempty"` // the child's own, made and dropped by it
	RedisConns  int    `json:"redis_conns"`
	PGConns     int    `json:"pg_conns"`
	CPUProfile  string `json:"cpu_profile,omitempty"` // an absolute path
}

// runNames are the names a run's children derive theirs from: each Redis
// row's keys go under prefix + its path's name + ":", each PostgreSQL row's
// tables in schema + "_" + its path's name, so that the run's leftovers, if
// any, share one prefix.
type runNames struct {
	prefix string // "idem-serverbench:<random>:"; no glob character
	schema string // "idem_serverbench_<random>"
}

func newRunNames() runNames {
	id := rand.Text()[:10]
	return runNames{prefix: "idem-serverbench:" + id + ":", schema: "idem_serverbench_" + strings.ToLower(id)}
}

// profilePath returns where the child of the row served on path writes its
// CPU profile when the phase's is base: "-" and the path's name inserted
// before base's extension.
func profilePath(base, path string) string {
	ext := filepath.Ext(base)
	return strings.TrimSuffix(base, ext) + "-" + strings.TrimPrefix(path, "/") + ext
}

// childConfig returns the configuration of rw's child.
func (c Config) childConfig(rw row, names runNames, profile string) childConfig {
	cc := childConfig{Row: rw.name}
	name := strings.TrimPrefix(rw.path, "/")
	switch rw.store {
	case "redis":
		cc.Redis, cc.RedisConns, cc.RedisPrefix = c.Redis, c.redisConns(), names.prefix+name+":"
	case "pg":
		cc.Postgres, cc.PGConns = c.Postgres, c.pgConns()
		cc.PGSchema = names.schema + "_" + strings.ReplaceAll(name, "-", "_")
	}
	if profile != "" {
		cc.CPUProfile = profilePath(profile, rw.path)
	}
	return cc
}

// Run measures every row at every level of cfg.Conc in cfg.Rounds interleaved
// rounds, printing the tables and ratio lines to out and progress notes to
// progress. It starts and stops a server child per row; each child removes
// its Redis keys and its schema before it exits.
func Run(ctx context.Context, cfg Config, out, progress io.Writer) (err error) {
	if err := cfg.check(); err != nil {
		return err
	}
	profile := ""
	if cfg.CPUProfile != "" {
		if profile, err = filepath.Abs(cfg.CPUProfile); err != nil {
			return err
		}
	}
	rows := rowsFor(cfg.Redis != "", cfg.Postgres != "")
	maxConc, names := slices.Max(cfg.Conc), newRunNames()
	ccs, pgConns := make([]childConfig, len(rows)), 0
	for i, rw := range rows {
		ccs[i] = cfg.childConfig(rw, names, profile)
		pgConns += ccs[i].PGConns
	}
	if pgConns > 0 {
		if err := checkPGRoom(ctx, cfg.Postgres, pgConns); err != nil {
			return err
		}
	}
	var children []*child
	defer func() {
		for _, srv := range children {
			err = errors.Join(err, srv.stop())
		}
	}()
	loads := make([]*load, len(rows))
	for i, rw := range rows {
		fmt.Fprintf(progress, "serverbench: starting the server child of %s\n", rw.name)
		srv, err := startChild(ctx, ccs[i])
		if err != nil {
			return err
		}
		children = append(children, srv)
		loads[i] = newLoad(srv, maxConc)
		defer loads[i].close()
	}
	rep := &report{w: out, cfg: cfg, rows: rows, names: names}
	rep.header()
	for _, c := range cfg.Conc {
		lvl, err := runLevel(ctx, cfg, loads, rows, c, progress)
		if err != nil {
			return err
		}
		rep.level(lvl)
	}
	rep.ratios()
	return nil
}

// runLevel measures every row at concurrency c, cfg.Rounds times, the row
// order rotated each round so that no row always runs first.
func runLevel(ctx context.Context, cfg Config, loads []*load, rows []row, c int, progress io.Writer) (*level, error) {
	lvl := &level{conc: c, byRow: make([][]*window, len(rows))}
	// One unmeasured pass over every row first: c connections, the child's
	// heap at its working size, the stores' pools filled, before any window.
	for i, rw := range rows {
		if _, err := loads[i].measure(ctx, rw, c, cfg.warmup(), false); err != nil {
			return nil, err
		}
	}
	for r := range cfg.Rounds {
		fmt.Fprintf(progress, "serverbench: concurrency %d, round %d/%d\n", c, r+1, cfg.Rounds)
		for k := range rows {
			i := (k + r) % len(rows)
			if _, err := loads[i].measure(ctx, rows[i], c, cfg.warmup(), false); err != nil {
				return nil, err
			}
			w, err := loads[i].measure(ctx, rows[i], c, cfg.D, true)
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
