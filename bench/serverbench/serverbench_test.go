// This file runs the server phase with tiny settings and checks its output's
// shape: every row at every level, every ratio line, every number parsing.
// The Redis and PostgreSQL rows run when their server answers (skipped
// otherwise, failed under CI), and must leave no key or schema behind. The
// test binary is also the server child.

package serverbench

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
	"github.com/idem-go/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	if IsChild() {
		os.Exit(ServeChild())
	}
	os.Exit(m.Run())
}

var tiny = Config{Conc: []int{1, 4}, D: 100 * time.Millisecond, Rounds: 2, Warmup: 20 * time.Millisecond}

func TestRunMemory(t *testing.T) {
	out := runTiny(t, tiny)
	checkReport(t, out, tiny, []string{"bare", "idem mem", "floor mem", "contract floor mem"})
	if !strings.Contains(out, "rows not run: pass -redis ADDR") || !strings.Contains(out, "rows not run: pass -postgres URL") {
		t.Errorf("the header does not say which rows were left out:\n%s", out)
	}
}

func TestRunRedis(t *testing.T) {
	rdb := redisClient(t)
	cfg := tiny
	cfg.Redis = redisAddr()
	out := runTiny(t, cfg)
	checkReport(t, out, cfg, []string{"bare", "idem mem", "floor mem", "contract floor mem", "idem redis", "floor redis", "contract floor redis"})
	prefix := quoted(t, out, "the run's keys under ")
	var keys []string
	iter := rdb.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) > 0 {
		t.Errorf("keys under %q left behind: %v (%v)", prefix, keys, err)
	}
}

func TestRunPostgres(t *testing.T) {
	url := pgtest.URL()
	conn := pgConn(t, url)
	cfg := tiny
	cfg.Postgres = url
	out := runTiny(t, cfg)
	checkReport(t, out, cfg, []string{"bare", "idem mem", "floor mem", "contract floor mem", "idem pg", "floor pg", "contract floor pg"})
	_, rest, _ := strings.Cut(out, "the run's schemas ")
	schema, _, _ := strings.Cut(rest, "_*")
	if !strings.HasPrefix(schema, "idem_serverbench_") {
		t.Fatalf("no schema named in the header:\n%s", out)
	}
	var left []string
	rows, err := conn.Query(context.Background(), `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, schema)
	if err == nil {
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(left) > 0 {
		t.Errorf("schemas %v left behind (%v)", left, err)
	}
}

// A CPU profile per row, each of its own child: each has samples of its
// serving requests, and idem's middleware is in the profile of idem's row and
// not in the floors'.
func TestCPUProfile(t *testing.T) {
	cfg := tiny
	cfg.Conc = []int{4}
	// Long enough windows that each row gets samples at 100 Hz on a busy machine.
	cfg.D, cfg.Rounds = time.Second, 1
	cfg.CPUProfile = filepath.Join(t.TempDir(), "server.pprof")
	runTiny(t, cfg)
	const serve = "github.com/idem-go/idem/server.(*Middleware).serve"
	for _, rw := range rowsFor(false, false) {
		p := profileStrings(t, profilePath(cfg.CPUProfile, rw.path))
		if !bytes.Contains(p, []byte("net/http.(*conn).serve")) {
			t.Errorf("row %s: the profile has no sample of a request served", rw.name)
		}
		if got, want := bytes.Contains(p, []byte(serve)), strings.HasPrefix(rw.name, "idem "); got != want {
			t.Errorf("row %s: the profile names %s: %v, want %v", rw.name, serve, got, want)
		}
	}
}

// profileStrings returns the profile at path, ungzipped: its string table
// holds the names of the functions sampled.
func profileStrings(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not gzipped: %v", path, err)
	}
	p, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProfilePath(t *testing.T) {
	for _, c := range []struct{ base, want string }{
		{"/tmp/server.pprof", "/tmp/server-idem-mem.pprof"},
		{"/tmp/server", "/tmp/server-idem-mem"},
	} {
		if got := profilePath(c.base, "/idem-mem"); got != c.want {
			t.Errorf("profilePath(%q, /idem-mem) = %q, want %q", c.base, got, c.want)
		}
	}
}

// A PostgreSQL without room for the rows' pools is a clear error before any
// child starts; one with room passes.
func TestPGRoomChecked(t *testing.T) {
	url := pgtest.URL()
	pgConn(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := checkPGRoom(ctx, url, 1<<20); err == nil || !strings.Contains(err.Error(), "connections free") {
		t.Errorf("checkPGRoom for a million connections: %v, want an error saying how many are free", err)
	}
	if err := checkPGRoom(ctx, url, 1); err != nil {
		t.Errorf("checkPGRoom for one connection: %v", err)
	}
}

// A store that does not answer is a clear error from Run: from the child, or
// for PostgreSQL from the room check before it.
func TestStoreUnreachable(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Conc: []int{1}, D: time.Second, Rounds: 1, Redis: "127.0.0.1:1"}, "-redis 127.0.0.1:1"},
		{Config{Conc: []int{1}, D: time.Second, Rounds: 1, Postgres: "postgres://postgres@127.0.0.1:1/test?connect_timeout=2"}, "-postgres"},
		{Config{Conc: []int{1}, D: time.Second, Rounds: 1, Postgres: "not a URL"}, "-postgres"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := Run(ctx, c.cfg, &bytes.Buffer{}, &bytes.Buffer{})
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run with %+v: %v, want an error naming %q", c.cfg, err, c.want)
		}
	}
}

func TestConfigChecked(t *testing.T) {
	for _, cfg := range []Config{
		{D: time.Second, Rounds: 1},
		{Conc: []int{0}, D: time.Second, Rounds: 1},
		{Conc: []int{1}, Rounds: 1},
		{Conc: []int{1}, D: time.Second},
	} {
		if err := Run(context.Background(), cfg, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("Run(%+v) = nil, want an error", cfg)
		}
	}
}

// runTiny runs the phase and returns its output.
func runTiny(t *testing.T, cfg Config) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	if err := Run(ctx, cfg, &out, &progress); err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, progress.String(), out.String())
	}
	t.Log("\n" + out.String())
	return out.String()
}

// checkReport checks that each level's table has every row in names, once,
// with seven figures (req/s, p50, p99, allocs/req, B/req, cpu/req,
// trips/req), and that there is a req/s and a CPU ratio line for each
// ratioDef whose rows ran, each with a positive ratio per level, the req/s
// line with its def's target if it has one.
func checkReport(t *testing.T, out string, cfg Config, names []string) {
	t.Helper()
	levels := strings.Split(out, "\nserver concurrency ")[1:]
	if len(levels) != len(cfg.Conc) {
		t.Fatalf("%d tables, want %d", len(levels), len(cfg.Conc))
	}
	for i, table := range levels {
		if !strings.HasPrefix(table, strconv.Itoa(cfg.Conc[i])+"\n") {
			t.Errorf("table %d is not for c=%d: %q", i, cfg.Conc[i], strings.SplitN(table, "\n", 2)[0])
		}
		table, _, _ = strings.Cut(table, "\nserver ratios")
		var rows int
		for line := range strings.Lines(table) {
			f := strings.Fields(line)
			if len(f) > 0 && strings.HasPrefix(f[0], "note") {
				t.Errorf("c=%d: %s", cfg.Conc[i], line)
			}
			name, figs, ok := rowFields(line, names)
			if !ok {
				continue
			}
			rows++
			checkFigures(t, name, figs)
		}
		if rows != len(names) {
			t.Errorf("c=%d: %d rows, want %d (%v)", cfg.Conc[i], rows, len(names), names)
		}
	}
	for _, prefix := range []string{"server ratio ", "server cpu ratio "} {
		for _, d := range ratioDefs {
			if !slices.Contains(names, d.a) || !slices.Contains(names, d.b) {
				continue
			}
			target := d.target
			if prefix != "server ratio " {
				target = "" // the CPU lines have none
			}
			checkRatioLine(t, out, prefix+d.a+" ÷ "+d.b+" ", cfg, target)
		}
	}
}

// checkRatioLine checks that out has one line that starts with name and
// holds a positive ratio per level, then target ("" for none).
func checkRatioLine(t *testing.T, out, name string, cfg Config, target string) {
	t.Helper()
	var n int
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		n++
		f := strings.Fields(rest)
		if len(f) < len(cfg.Conc) {
			t.Errorf("ratio line %q: %d figures, want %d ratios", line, len(f), len(cfg.Conc))
			continue
		}
		for _, x := range f[:len(cfg.Conc)] {
			v, err := strconv.ParseFloat(strings.TrimSuffix(x, "x"), 64)
			if !strings.HasSuffix(x, "x") || err != nil || v <= 0 {
				t.Errorf("ratio line %q: %q is not a positive ratio", line, x)
			}
		}
		if got := strings.Join(f[len(cfg.Conc):], " "); got != target {
			t.Errorf("ratio line %q: target %q, want %q", line, got, target)
		}
	}
	if n != 1 {
		t.Errorf("%d lines start with %q, want 1", n, name)
	}
}

// rowFields splits a table line that starts with one of names.
func rowFields(line string, names []string) (name string, figs []string, ok bool) {
	for _, n := range names {
		if rest, ok := strings.CutPrefix(line, n+" "); ok {
			return n, strings.Fields(rest), true
		}
	}
	return "", nil, false
}

func checkFigures(t *testing.T, name string, f []string) {
	t.Helper()
	if len(f) != 7 {
		t.Errorf("row %s: %d figures %q, want 7", name, len(f), f)
		return
	}
	// A claim and a completion at least, over Redis or PostgreSQL; none in memory.
	if trips, err := strconv.ParseFloat(f[6], 64); strings.HasSuffix(name, " mem") || name == "bare" {
		if f[6] != "-" {
			t.Errorf("row %s: trips/req %q, want -", name, f[6])
		}
	} else if err != nil || trips < 2 {
		t.Errorf("row %s: trips/req %q, want a number of at least 2", name, f[6])
	}
	for i, col := range []string{"req/s", "allocs/req", "B/req"} {
		v, err := strconv.ParseFloat(f[[]int{0, 3, 4}[i]], 64)
		if err != nil || v <= 0 {
			t.Errorf("row %s: %s %q is not a positive number", name, col, f[[]int{0, 3, 4}[i]])
		}
	}
	for i, col := range []string{"p50", "p99", "cpu/req"} {
		d, err := time.ParseDuration(strings.Replace(f[[]int{1, 2, 5}[i]], "µs", "us", 1))
		if err != nil || d <= 0 && (col != "cpu/req" || harness.ProcessCPU() > 0) { // 0 where the CPU time is not known
			t.Errorf("row %s: %s %q is not a positive duration", name, col, f[[]int{1, 2, 5}[i]])
		}
	}
}

// quoted returns the Go-quoted string that follows after in out.
func quoted(t *testing.T, out, after string) string {
	t.Helper()
	_, rest, _ := strings.Cut(out, after)
	var s string
	if _, err := fmt.Sscanf(rest, "%q", &s); err != nil || s == "" {
		t.Fatalf("nothing quoted after %q:\n%s", after, out)
	}
	return s
}

// redisAddr is the Redis the tests use: $IDEM_REDIS_ADDR, or the local one.
func redisAddr() string {
	if a := os.Getenv("IDEM_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// redisClient returns a client of the test Redis, closed when t ends; t is
// skipped (failed under CI) if Redis does not answer.
func redisClient(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		pgtest.Unavailable(t, "Redis at "+redisAddr()+" (set IDEM_REDIS_ADDR)", err)
	}
	return rdb
}

// pgConn returns a connection to the test PostgreSQL, closed when t ends; t
// is skipped (failed under CI) if it does not answer.
func pgConn(t *testing.T, url string) *pgx.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		pgtest.Unavailable(t, "PostgreSQL at "+url+" (set IDEM_POSTGRES_URL)", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
