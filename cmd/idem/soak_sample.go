// This file holds the soak's sampler (soak.go): every -sample-every it takes
// the worker's last stats line (worker_soak.go), the figures of this process,
// which runs the fake servers, the journal file's size, and the run's
// counts, prints them as a progress line and keeps them for the CSV written
// here and the chart of soak_chart.go.

package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"time"
)

// workerSample is one stats line of the worker.
type workerSample struct {
	procStats
	pending  int
	commits  int
	p50, p99 time.Duration // of the write-ahead commits since its last line
}

// parseWorkerStats reads a stats line's fields after "stats".
func parseWorkerStats(f []string) (workerSample, error) {
	if len(f) != 7 {
		return workerSample{}, fmt.Errorf("stats line: %d fields, want 7", len(f))
	}
	var n [7]int64
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return workerSample{}, fmt.Errorf("stats line: field %d: %w", i+1, err)
		}
		n[i] = v
	}
	return workerSample{procStats: procStats{heap: uint64(max(n[0], 0)), goroutines: int(n[1]), files: int(n[2])},
		pending: int(n[3]), commits: int(n[4]), p50: time.Duration(n[5]), p99: time.Duration(n[6])}, nil
}

// sample is the run's health at one moment.
type sample struct {
	at           time.Duration // since the soak's start
	client       *workerSample // nil if no stats line came in the interval (a life just killed)
	server       procStats     // this process, which runs the fake servers
	journalBytes int64         // -1 if unknown
	liveKeys     int           // unexpired keys in the servers' Store in memory; -1 if unknown
	settled      int           // payments settled so far: the ledger's and the registry's entries
	kills        int
}

// column is one column of the CSV, and a series the chart may draw.
type column struct {
	name  string
	value func(sample) (float64, bool) // false for an empty cell
}

const mib = 1 << 20

// soakColumns are the CSV's columns, in order.
var soakColumns = []column{
	{"elapsed_s", func(s sample) (float64, bool) { return s.at.Seconds(), true }},
	{"client_heap_mib", clientValue(func(w *workerSample) float64 { return float64(w.heap) / mib })},
	{"client_goroutines", clientValue(func(w *workerSample) float64 { return float64(w.goroutines) })},
	{"client_open_files", clientValue(func(w *workerSample) float64 { return float64(w.files) })},
	{"server_heap_mib", func(s sample) (float64, bool) { return float64(s.server.heap) / mib, true }},
	{"server_goroutines", func(s sample) (float64, bool) { return float64(s.server.goroutines), true }},
	{"server_open_files", func(s sample) (float64, bool) { return float64(s.server.files), s.server.files >= 0 }},
	{"journal_mib", func(s sample) (float64, bool) { return float64(s.journalBytes) / mib, s.journalBytes >= 0 }},
	{"pending", clientValue(func(w *workerSample) float64 { return float64(w.pending) })},
	{"commits", clientValue(func(w *workerSample) float64 { return float64(w.commits) })},
	{"commit_p50_ms", commitValue(func(w *workerSample) time.Duration { return w.p50 })},
	{"commit_p99_ms", commitValue(func(w *workerSample) time.Duration { return w.p99 })},
	{"settled", func(s sample) (float64, bool) { return float64(s.settled), true }},
	{"server_live_keys", func(s sample) (float64, bool) { return float64(s.liveKeys), s.liveKeys >= 0 }},
	{"kills", func(s sample) (float64, bool) { return float64(s.kills), true }},
}

func clientValue(f func(*workerSample) float64) func(sample) (float64, bool) {
	return func(s sample) (float64, bool) {
		if s.client == nil {
			return 0, false
		}
		return f(s.client), true
	}
}

// commitValue is a latency in milliseconds, empty for an interval without commits.
func commitValue(f func(*workerSample) time.Duration) func(sample) (float64, bool) {
	return func(s sample) (float64, bool) {
		if s.client == nil || s.client.commits == 0 {
			return 0, false
		}
		return float64(f(s.client)) / float64(time.Millisecond), true
	}
}

// columnByName returns the column named name; it panics on a name not in
// soakColumns, a programming error.
func columnByName(name string) column {
	for _, c := range soakColumns {
		if c.name == name {
			return c
		}
	}
	panic("soak: no column " + name)
}

// writeCSV writes samples to path, one row each, under a header of the
// columns' names.
func writeCSV(path string, samples []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	row := make([]string, len(soakColumns))
	for i, c := range soakColumns {
		row[i] = c.name
	}
	w.Write(row)
	for _, s := range samples {
		for i, c := range soakColumns {
			row[i] = ""
			if v, ok := c.value(s); ok {
				row[i] = strconv.FormatFloat(v, 'f', -1, 64)
			}
		}
		w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startSoak samples s's health every interval until the returned stop is
// called; stop then writes the CSV and the chart. It does nothing without a
// soak.
func (s *side) startSoak() (stop func() error) {
	if s.soak == nil {
		return func() error { return nil }
	}
	start, every := time.Now(), s.soak.cfg.every
	done, finished := make(chan struct{}), make(chan struct{})
	profiled := !s.soak.cfg.profiles // the warm-up's profile, or none wanted
	go func() {
		defer close(finished)
		tickUntil(done, every, func() {
			at := time.Since(start)
			fmt.Println(s.takeSample(at).describe())
			if !profiled && at >= s.soak.cfg.soakWarmUp() {
				profiled = true
				if err := writeHeapProfile(s.soak.cfg.out, 1); err != nil {
					fmt.Println("  " + err.Error())
				}
			}
		})
	}()
	return func() error {
		close(done)
		<-finished
		if s.soak.cfg.profiles {
			if err := writeHeapProfile(s.soak.cfg.out, 2); err != nil {
				return err
			}
		}
		s.mu.Lock()
		samples := s.soak.samples
		s.mu.Unlock()
		return writeSoakFiles(s.soak.cfg.out, samples)
	}
}

// takeSample reads the figures now, keeps them and returns them.
func (s *side) takeSample(at time.Duration) sample {
	smp := sample{at: at, server: readProcStats(), journalBytes: -1, liveKeys: s.srv.liveKeys()}
	if fi, err := os.Stat(s.state); err == nil {
		smp.journalBytes = fi.Size()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	smp.client, s.soak.stats = s.soak.stats, nil
	smp.settled, smp.kills = s.settled.len(), s.kills
	s.soak.samples = append(s.soak.samples, smp)
	return smp
}

// describe is the sample's progress line.
func (smp sample) describe() string {
	line := fmt.Sprintf("    %6.0fs  %d settled, %d SIGKILLs; servers: heap %.1f MiB, %d goroutines, %d files; journal %.2f MiB",
		smp.at.Seconds(), smp.settled, smp.kills, float64(smp.server.heap)/mib, smp.server.goroutines, smp.server.files,
		float64(smp.journalBytes)/mib)
	if smp.liveKeys >= 0 {
		line += fmt.Sprintf("; store: %d live keys", smp.liveKeys)
	}
	if c := smp.client; c != nil {
		line += fmt.Sprintf("; client: heap %.1f MiB, %d goroutines, %d files, %d pending, %d commits",
			float64(c.heap)/mib, c.goroutines, c.files, c.pending, c.commits)
		if c.commits > 0 {
			line += fmt.Sprintf(" p50 %v p99 %v", c.p50.Round(time.Microsecond), c.p99.Round(time.Microsecond))
		}
	}
	return line
}

// writeSoakFiles writes prefix.csv and prefix.png and says where.
func writeSoakFiles(prefix string, samples []sample) error {
	if err := writeCSV(prefix+".csv", samples); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if err := writeChart(prefix+".png", samples); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	fmt.Printf("  soak: %d samples in %s.csv, chart %s.png\n", len(samples), prefix, prefix)
	return nil
}
