// This file holds "idem chaos -duration": a soak. Instead of stopping after
// -n payments, the worker (worker_soak.go) keeps sending new ones through the
// usual fault plan for the duration, SIGKILLed at moments spread over it,
// and the run ends with the usual exactly-once check (demo_report.go) over
// every payment it started. Meanwhile soak_sample.go samples the health of
// the worker, the servers and the journal, and soak_chart.go draws it.

package main

import (
	"flag"
	"fmt"
	"runtime"
	"time"
)

// soakConfig is a soak's configuration; demoConfig.soak is nil without one.
type soakConfig struct {
	duration  time.Duration // how long new payments are sent
	every     time.Duration // how often the health figures are sampled
	retention time.Duration // the journal's Retention and the keys' TTL; 0 for the defaults
	out       string        // path prefix of the CSV and PNG files
	profiles  bool          // write heap profiles of this process (soak_profile.go)
}

// registerSoak defines the soak's flags on chaos's flag set.
func registerSoak(fs *flag.FlagSet, sc *soakConfig) {
	fs.DurationVar(&sc.duration, "duration", 0, "a soak: send new payments for this long instead of -n, with -kills SIGKILLs\n"+
		"spread over it, sampling the run's health every -sample-every into PREFIX.csv and PREFIX.png (-soak-out)")
	fs.DurationVar(&sc.every, "sample-every", 5*time.Second, "with -duration: how often the health figures are sampled")
	fs.DurationVar(&sc.retention, "retention", 0, "with -duration: the journal's Retention (and the client's and server's key TTL),\n"+
		"so that settled records are pruned within the run; 0 keeps the defaults (7 days, 24 hours)")
	fs.BoolVar(&sc.profiles, "heap-profiles", false, "with -duration: write heap profiles of the chaos process (which runs the servers)\n"+
		"to PREFIX-heap-1.pprof after the warm-up and PREFIX-heap-2.pprof at the end")
	fs.StringVar(&sc.out, "soak-out", "idem-soak", "with -duration: path `prefix` of the CSV and PNG files the soak writes")
}

// apply checks sc and, for a soak, sets cfg for one: kills spread over the
// duration (unless -kill-within was given) and a budget that outlasts it.
func (sc *soakConfig) apply(fs *flag.FlagSet, cfg *demoConfig) error {
	if sc.duration == 0 {
		return nil
	}
	switch {
	case sc.duration < 0 || sc.every <= 0 || sc.retention < 0:
		return usageError(fs.Name(), "-duration and -sample-every must be > 0, -retention >= 0")
	case sc.retention > 0 && sc.retention < time.Minute:
		// A payment left pending longer than the key TTL is never re-sent;
		// a minute leaves the fault plan's waits far behind.
		return usageError(fs.Name(), "-retention must be at least 1m")
	case sc.out == "":
		return usageError(fs.Name(), "-soak-out must name a path prefix")
	case isPostgres(cfg.journal):
		return usageError(fs.Name(), "-duration is for a journal file: a soak on a fleet is not there yet")
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["kill-within"] && cfg.kills > 0 {
		// A life lasts 0.6 killAfter on average: the kills then end at about
		// 85% of the duration, well clear of it by chance.
		cfg.killAfter = max(time.Duration(float64(sc.duration)*0.85/(0.6*float64(cfg.kills))), 200*time.Millisecond)
	}
	if !given["timeout"] {
		cfg.budget = sc.duration + 5*time.Minute
	}
	if sc.profiles {
		// Every 4 KiB allocated, not every 512 KiB: small per-payment
		// allocations then show in the profiles with their real share.
		runtime.MemProfileRate = 4096
	}
	cfg.soak = sc
	return nil
}

// serverKeyTTL is how long the fake servers keep a key: the soak's
// retention, so that their store is bounded too; 0 for their default.
func (sc *soakConfig) serverKeyTTL() time.Duration {
	if sc == nil {
		return 0
	}
	return sc.retention
}

// soakRun is a side's soak in progress: where the next life starts, and the
// samples so far. Its fields are guarded by the side's mu.
type soakRun struct {
	cfg     *soakConfig
	until   time.Time
	next    int           // the first payment not seen settled
	started int           // one past the highest payment a worker started
	stats   *workerSample // the worker's last stats line, nil once sampled
	samples []sample
}

// soakArgs are the worker's soak flags for its next life: on from the first
// payment not seen settled, and every payment started so far finished even
// past the deadline. The caller does not hold s.mu.
func (s *side) soakArgs() []string {
	if s.soak == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.soak
	if r.until.IsZero() {
		r.until = time.Now().Add(r.cfg.duration)
	}
	for s.settled.has(opID(r.next)) {
		r.next++
	}
	return []string{"-from", fmt.Sprint(r.next), "-n", fmt.Sprint(r.started), "-until", fmt.Sprint(r.until.UnixNano()),
		"-retention", r.cfg.retention.String(), "-stats", r.cfg.every.String()}
}

// outOf is "/N" after a count of payments done, or nothing in a soak, which
// has no N.
func (s *side) outOf(cfg demoConfig) string {
	if s.soak != nil {
		return ""
	}
	return fmt.Sprintf("/%d", cfg.n)
}

// soakLine takes the worker's soak lines: it keeps a stats line, which it
// reports consumed, and counts a start. The caller holds s.mu.
func (s *side) soakLine(f []string) bool {
	if s.soak == nil {
		return false
	}
	switch f[0] {
	case "stats":
		if ws, err := parseWorkerStats(f[1:]); err == nil {
			s.soak.stats = &ws
		}
		return true
	case "start":
		if i, ok := opNumber(f[1]); ok {
			s.soak.started = max(s.soak.started, i+1)
		}
	}
	return false
}

// soakPayments is how many payments the soak started, all of which the
// final check expects exactly once.
func (s *side) soakPayments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.soak.started
}
