// This file holds the command line: the flags, their defaults, and -quick.

package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idem-go/idem/bench/serverbench"
)

// config is one benchmark run's settings.
type config struct {
	conc   []int         // concurrency levels, one table each
	d      time.Duration // measured time per client and round
	rounds int           // interleaved rounds; figures are medians over them
	resume int           // pending operations for the resume figure; 0 skips it
	// resumeBudget bounds the time spent making the resume backlog; 0 means none.
	resumeBudget time.Duration
	fsyncs       int           // samples for the fsync and bbolt commit figures
	dir          string        // parent of the temporary directory holding the journals
	postgres     string        // PostgreSQL URL for the idem-pg POST row; "" skips it
	serverDelay  time.Duration // the server's think time per /payments request
	cpuProfile   string        // write a CPU profile of the rounds here; "" for none
	memProfile   string        // write an allocation profile of the rounds here; "" for none
	resumeCPU    string        // write a CPU profile of the warm Resume here; "" for none
	redis        string        // Redis address for the server phase's Redis rows; "" skips them
	server       bool          // run the server phase (bench/serverbench) after the client phases
	serverOnly   bool          // run the server phase alone
	serverCPU    string        // write the server phase's CPU profile (of its child) here; "" for none
}

// serverBench is the server phase's configuration: the same levels, windows
// and rounds as the client tables.
func (c config) serverBench() serverbench.Config {
	return serverbench.Config{Conc: c.conc, D: c.d, Rounds: c.rounds, Warmup: c.warmup(), Redis: c.redis, Postgres: c.postgres, CPUProfile: c.serverCPU}
}

// warmup is the unmeasured run before each measured window: it fills the
// connection pools and lets the journal file reach its working size.
func (c config) warmup() time.Duration {
	return min(200*time.Millisecond, max(50*time.Millisecond, c.d/4))
}

func (c config) maxConc() int { return slices.Max(c.conc) }

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	conc := fs.String("c", "1,16,64", "comma-separated concurrency levels (goroutines issuing requests back to back)")
	d := fs.Duration("d", time.Second, "measured duration per client and round (after a short warm-up)")
	rounds := fs.Int("rounds", 5, "interleaved rounds; every figure is the median over rounds")
	resume := fs.Int("resume", 100000, "pending operations for the resume figure (0 skips it)")
	budget := fs.Duration("resume-budget", time.Minute, "stop making the resume backlog after this long and resume what was made (0: no limit)")
	quick := fs.Bool("quick", false, "smoke run: -rounds 1 -d 300ms -resume 10000 (explicit flags win)")
	postgres := fs.String("postgres", "", "PostgreSQL URL (e.g. postgres://postgres@127.0.0.1:5432/test): adds the row "+pgRow+", idem over journal/pgjournal (empty: no such row)")
	delay := fs.Duration("server-delay", 0, "the server's think time before answering each /payments request and each of the resume figure's (resumed or plain), as a remote API has (e.g. 20ms)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the rounds (client side) to `file`, samples labelled by row (go tool pprof -tagfocus 'row=idem POST')")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the rounds (client side) to `file`; every allocation sampled")
	resumeCPU := fs.String("resume-cpuprofile", "", "write a CPU profile of the warm Resume pass (client side) to `file`")
	redis := fs.String("redis", "", "Redis address (e.g. 127.0.0.1:6379): adds the server phase's Redis rows, idem over server/redisstore and its floors (empty: no such rows)")
	server := fs.Bool("server", true, "run the server phase: the middleware against floor middlewares (bench/serverbench); -server=false skips it")
	serverOnly := fs.Bool("server-only", false, "run the server phase alone")
	serverCPU := fs.String("server-cpuprofile", "", "write CPU profiles of the server phase to `file`, one per row by its child: file with the row's path before its extension (server.pprof: server-idem-mem.pprof)")
	dir := fs.String("dir", os.TempDir(), "directory for the temporary journals (must be a real disk, not tmpfs)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: cd bench && go run . [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := config{d: *d, rounds: *rounds, resume: *resume, resumeBudget: *budget, fsyncs: 200, dir: *dir, postgres: *postgres, serverDelay: *delay, cpuProfile: *cpuProfile, memProfile: *memProfile, resumeCPU: *resumeCPU, redis: *redis, server: *server, serverOnly: *serverOnly, serverCPU: *serverCPU}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rounds"] {
			cfg.rounds = 1
		}
		if !set["d"] {
			cfg.d = 300 * time.Millisecond
		}
		if !set["resume"] {
			cfg.resume = 10000
		}
	}
	var err error
	if cfg.conc, err = parseConc(*conc); err != nil {
		return config{}, err
	}
	switch {
	case cfg.d <= 0:
		return config{}, fmt.Errorf("-d %v: must be positive", cfg.d)
	case cfg.rounds < 1:
		return config{}, fmt.Errorf("-rounds %d: must be at least 1", cfg.rounds)
	case *delay < 0:
		return config{}, fmt.Errorf("-server-delay %v: must not be negative", *delay)
	case cfg.resume < 0 || cfg.resumeBudget < 0:
		return config{}, fmt.Errorf("-resume %d -resume-budget %v: must not be negative", cfg.resume, cfg.resumeBudget)
	}
	return cfg, nil
}

func parseConc(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-c %q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}
