// This file holds run, the order of a benchmark: start the server child, build
// the clients, run the interleaved rounds at each concurrency, measure the
// fsync floor, then the resume figure. report.go prints as it goes.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/idem-go/idem/bench/serverbench"
)

// run writes the report to out and progress notes to progress.
func run(ctx context.Context, cfg config, out, progress io.Writer) error {
	began := time.Now()
	if cfg.serverOnly {
		return serverbench.Run(ctx, cfg.serverBench(), out, progress)
	}
	dir, err := os.MkdirTemp(cfg.dir, "idem-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := startChild(cfg.serverDelay)
	if err != nil {
		return err
	}
	defer srv.stop()
	set, err := newClients(ctx, srv, dir, cfg.postgres, cfg.maxConc())
	if err != nil {
		return err
	}
	defer set.close()

	rep := &report{w: out, cfg: cfg, rows: set.rows}
	rep.header(srv, dir)
	post := set.rows[rowIndex(set.rows, "net/http POST")].do
	afterPost := func() (floorSample, error) {
		return alternate(dir, floorPerRound, func() error { return post(ctx) })
	}
	writeProfiles, err := startProfiles(cfg)
	if err != nil {
		return err
	}
	for _, c := range cfg.conc {
		var floor func() (floorSample, error)
		if c == 1 {
			floor = afterPost
		}
		lvl, err := runLevel(ctx, cfg, set.rows, c, floor, progress)
		if err != nil {
			return err
		}
		rep.level(lvl)
	}
	if err := writeProfiles(); err != nil {
		return err
	}
	if err := set.close(); err != nil {
		return err
	}

	fmt.Fprintf(progress, "bench: timing %d fsyncs and %d bbolt commits\n", cfg.fsyncs, cfg.fsyncs)
	fsync, err := measureFsync(dir, cfg.fsyncs)
	if err != nil {
		return fmt.Errorf("fsync figure: %w", err)
	}
	commit, err := measureBoltCommit(dir, cfg.fsyncs)
	if err != nil {
		return fmt.Errorf("bbolt commit figure: %w", err)
	}
	between, err := afterPost()
	if err != nil {
		return fmt.Errorf("bbolt commit figure: %w", err)
	}
	rep.ratios()
	rep.writeAheads()
	rep.commits()
	rep.postgres()
	rep.latency(fsync, commit, between.commit)

	if cfg.resume > 0 {
		rr, err := runResume(ctx, cfg, srv, dir, progress)
		if err != nil {
			return fmt.Errorf("resume figure: %w", err)
		}
		rep.resume(rr)
	}
	if cfg.server {
		if err := serverbench.Run(ctx, cfg.serverBench(), out, progress); err != nil {
			return err
		}
	}
	rep.total(time.Since(began))
	return nil
}
