// This file prints the report: the header, one table per concurrency, the
// ratios, the latency and fsync lines, and the resume lines. Ratios are always
// printed with an "x" and on lines that start with "ratio ".

package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/bench/internal/harness"
)

// report prints to w as the run goes, and keeps the levels for the ratios.
type report struct {
	w      io.Writer
	cfg    config
	rows   []client
	levels []*levelResult
}

func (r *report) printf(format string, args ...any) { fmt.Fprintf(r.w, format, args...) }

func (r *report) header(srv *child, dir string) {
	fsDesc, ram := fileSystem(dir)
	cfg := r.cfg
	r.printf("idem client benchmark   %s\n", time.Now().Format("2006-01-02 15:04:05 MST"))
	r.printf("  flags      -c %s -d %v -rounds %d -resume %d -resume-budget %v -server-delay %v\n",
		joinInts(cfg.conc), cfg.d, cfg.rounds, cfg.resume, cfg.resumeBudget, cfg.serverDelay)
	r.printf("  machine    %s\n", machineLine())
	r.printf("  journals   %s on %s\n", dir, fsDesc)
	if ram {
		r.printf("  WARNING    that is a RAM file system: fsync is free there; pass -dir on a real disk\n")
	}
	r.printf("  server     child process %d at %s, HTTP/1.1; reads the body, POST answers 201 %s, GET 200\n",
		srv.pid(), srv.addr, created)
	r.printf("  body       POST: the same %d-byte JSON payment (amount, currency, reference); a fresh *http.Request per call\n",
		len(paymentBody))
	r.printf("  net/http   *http.Client, clone of http.DefaultTransport with MaxIdleConnsPerHost %d (the largest -c)\n", cfg.maxConc())
	r.printf("  retryable  retryablehttp.NewClient() defaults, Logger nil, .StandardClient(); its own default transport\n")
	r.printf("             (go-cleanhttp pooled: MaxIdleConnsPerHost GOMAXPROCS+1 = %d)\n", runtime.GOMAXPROCS(0)+1)
	r.printf("  idem       idem.Open(journal above, Options{Base: the net/http transport}), defaults otherwise;\n")
	r.printf("             GET is not journaled; each POST gets a random key, an fsynced write-ahead and a settle\n")
	r.printf("  floor      the least a durable bbolt write-ahead client does (floor.go): one committer drains every\n")
	r.printf("             queued put into one db.Update, no fixed delay; the POST waits for its put's commit; its\n")
	r.printf("             settle is a delete riding the next commit, or flushed %v later; its own file, same directory\n", floorFlush)
	r.printf("  contract   the floor doing what idem's contract asks (floor_contract.go): a crypto/rand UUID key, the body's\n")
	r.printf("             SHA-256, the write-ahead and a settled record in idem's binary form, settled records written\n")
	r.printf("             %v or %d KiB at a time as idem's history is; the POST sent as the GET floor below sends it;\n", contractHistoryDelay, contractHistoryMax>>10)
	r.printf("             its own file, same directory\n")
	r.printf("  GET floor  contract floor GET (floor_get.go): net/http with what idem's contract asks of a GET it does not\n")
	r.printf("             journal: a copy of the request carrying the attempt header, under a %v attempt timeout until\n", idem.DefaultAttemptTimeout)
	r.printf("             the response headers, in a context ended when the body is closed, its status classified\n")
	if cfg.serverDelay > 0 {
		r.printf("  think      the server sleeps %v before answering each /payments request, and each of the resume figure's (a remote API)\n", cfg.serverDelay)
	}
	r.printf("  method     per client and round: %v warm-up, then %v measured; %d interleaved round(s), the client order\n",
		cfg.warmup(), cfg.d, cfg.rounds)
	r.printf("             rotating. Every figure is the median over rounds. p50/p99: of every request in that round.\n")
	r.printf("             allocs/req and B/req: runtime.MemStats Mallocs and TotalAlloc deltas over the window ÷ requests,\n")
	r.printf("             this process only (client side); cpu/req: its getrusage user+system time ÷ requests.\n")
	r.printf("             commits/op: Journal().Stats() ΔCommits ÷ ΔWriteAheads; pages/commit: bbolt's TxStats.Write\n")
	r.printf("             (pages written, meta included) ÷ commits\n")
	r.printf("             (for %s: pgjournal's Stats, the transactions that wait for PostgreSQL's WAL flush).\n", pgRow)
}

func (r *report) level(lvl *levelResult) {
	r.levels = append(r.levels, lvl)
	r.printf("\nconcurrency %d\n", lvl.conc)
	r.printf("%-20s %9s %9s %9s %11s %9s %11s %9s %13s\n", "client", "req/s", "p50", "p99", "allocs/req", "B/req", "commits/op", "cpu/req", "pages/commit")
	for i, row := range r.rows {
		ss := lvl.byClient[i]
		commits, pages := "-", "-"
		if row.commits != nil {
			commits = fmt.Sprintf("%.3f", harness.Over(ss, (*sample).commitsPerOp))
			if p := harness.Over(ss, (*sample).pagesPerCommit); p > 0 {
				pages = fmt.Sprintf("%.2f", p)
			}
		}
		r.printf("%-20s %9.0f %9s %9s %11.1f %9.0f %11s %9s %13s\n", row.name,
			harness.Over(ss, (*sample).reqPerSec),
			fmtDur(asDuration(harness.Over(ss, p50))), fmtDur(asDuration(harness.Over(ss, p99))),
			harness.Over(ss, func(s *sample) float64 { return s.perReq(s.alloc.n) }),
			harness.Over(ss, func(s *sample) float64 { return s.perReq(s.alloc.bytes) }),
			commits,
			fmtDur(asDuration(harness.Over(ss, func(s *sample) float64 { return s.perReq(uint64(s.cpu)) }))),
			pages)
	}
	for i, row := range r.rows {
		harness.NoteFailures(r.w, row.name, lvl.byClient[i], func(s *sample) (uint64, error) { return s.errors, s.firstErr })
	}
}

// ratioDefs are the ratio lines: a ÷ b of req/s.
var ratioDefs = [][2]string{
	{"idem POST", floorRow},
	{"idem POST", contractRow},
	{floorRow, "net/http POST"},
	{"idem POST", "net/http POST"},
	{"idem POST", "retryablehttp POST"},
	{"idem GET", "net/http GET"},
	{"idem GET", contractGETRow},
	{contractGETRow, "net/http GET"},
	{pgRow, "net/http POST"},
	{pgRow, "idem POST"},
	{pgRow, pgFloorRow},
	{pgRow, pgContractRow},
	{pgContractRow, pgFloorRow},
}

func (r *report) ratios() {
	r.printf("\nratios of req/s, measured in this run (x = a ratio; each the median over rounds of the per-round ratio)\n")
	r.printf("%-42s", "")
	for _, lvl := range r.levels {
		r.printf(" %8s", fmt.Sprintf("c=%d", lvl.conc))
	}
	r.printf("\n")
	for _, d := range ratioDefs {
		if !hasRow(r.rows, d[0]) {
			continue // the PostgreSQL row without -postgres
		}
		a, b := rowIndex(r.rows, d[0]), rowIndex(r.rows, d[1])
		r.printf("%-42s", "ratio "+d[0]+" ÷ "+d[1])
		for _, lvl := range r.levels {
			x := harness.Paired(lvl.byClient[a], lvl.byClient[b], func(a, b *sample) float64 { return a.reqPerSec() / b.reqPerSec() })
			r.printf(" %7.3fx", x)
		}
		r.printf("\n")
	}
}

// writeAheads prints, at each concurrency, how long idem POST's write-ahead
// took (waiting for the commit in progress, then riding the next) and how
// often the journal committed, beside the POSTs' p50: where the time of a
// journaled call goes once many share one disk.
func (r *report) writeAheads() {
	idemPost, plainPost := rowIndex(r.rows, "idem POST"), rowIndex(r.rows, "net/http POST")
	r.printf("\nwrite-ahead under load (idem POST: Observer.WriteAhead, and the journal's commits over the window)\n")
	r.printf("%-6s %16s %10s %17s %11s %14s %18s\n", "", "write-ahead p50", "p99", "one commit every", "ops/commit", "idem POST p50", "net/http POST p50")
	for _, lvl := range r.levels {
		ss := lvl.byClient[idemPost]
		every := harness.Over(ss, func(s *sample) float64 { return s.perCommit(float64(s.elapsed)) })
		perCommit := harness.Over(ss, func(s *sample) float64 { return s.perCommit(float64(s.counts.writeAheads)) })
		r.printf("%-6s %16s %10s %17s %11.1f %14s %18s\n", fmt.Sprintf("c=%d", lvl.conc),
			fmtDur(asDuration(harness.Over(ss, func(s *sample) float64 { return float64(s.writeAhead.quantile(0.50)) }))),
			fmtDur(asDuration(harness.Over(ss, func(s *sample) float64 { return float64(s.writeAhead.quantile(0.99)) }))),
			fmtDur(asDuration(every)), perCommit,
			fmtDur(asDuration(harness.Over(ss, p50))), fmtDur(asDuration(harness.Over(lvl.byClient[plainPost], p50))))
	}
	r.printf("       A write-ahead that arrives during a commit waits for the rest of it, then for all of the\n")
	r.printf("       next, which carries everything queued meanwhile: 1.5 commit intervals on average were all\n")
	r.printf("       commits alike (the p50 above is what it took). With c calls in flight, req/s is at most\n")
	r.printf("       c ÷ (write-ahead time + the rest of the call), however fast the CPU.\n")
}

func (r *report) latency(fsync, commit, between spread) {
	r.printf("\n")
	idemPost, plainPost := rowIndex(r.rows, "idem POST"), rowIndex(r.rows, "net/http POST")
	for _, lvl := range r.levels {
		if lvl.conc != 1 {
			continue
		}
		added := harness.Paired(lvl.byClient[idemPost], lvl.byClient[plainPost], func(a, b *sample) float64 { return p50(a) - p50(b) })
		commits := harness.Over(lvl.byClient[idemPost], (*sample).commitsPerOp)
		r.printf("added latency at c=1   idem POST p50 − net/http POST p50 = %s (median over rounds of the per-round difference)\n",
			fmtDur(asDuration(added)))
		wa := harness.Over(lvl.byClient[idemPost], func(s *sample) float64 { return float64(s.writeAhead.quantile(0.50)) })
		r.printf("                       of which idem's write-ahead commit (fsyncs included), as Observer.WriteAhead\n")
		r.printf("                       reports it in the same windows: p50 %s\n", fmtDur(asDuration(wa)))
		r.printf("                       floor: %.3f journal commits per POST (deferred flushes included) × the bbolt commit p50 below = %s\n",
			commits, fmtDur(asDuration(commits*float64(commit.p50))))
		if len(lvl.floor) == len(lvl.byClient[idemPost]) {
			bare, alone := make([]float64, len(lvl.floor)), make([]float64, len(lvl.floor))
			for i, f := range lvl.floor {
				bare[i] = float64(f.commitThenPost.p50) - p50(lvl.byClient[plainPost][i])
				alone[i] = float64(f.commit.p50)
			}
			r.printf("                       or a bare commit before each POST (a one-put bbolt commit, then the same POST,\n")
			r.printf("                       %d times a round after the clients; fsync latency here drifts from minute to\n", floorPerRound)
			r.printf("                       minute): p50 of the pair − net/http POST p50 = %s (median over rounds); its\n", fmtDur(asDuration(harness.Median(bare))))
			r.printf("                       commit alone, which follows a POST as idem's does: p50 %s\n", fmtDur(asDuration(harness.Median(alone))))
		}
	}
	r.printf("fsync                  p50 %s  p99 %s   (f.Sync after a fresh 4 KiB append, %d times, in the journal's directory)\n",
		fmtDur(fsync.p50), fmtDur(fsync.p99), fsync.n)
	r.printf("bbolt commit           p50 %s  p99 %s   (db.Update with one 200-byte put, %d times, same directory)\n",
		fmtDur(commit.p50), fmtDur(commit.p99), commit.n)
	r.printf("  after a POST         p50 %s  p99 %s   (the same, each commit after a net/http POST to the server, untimed; %d times)\n",
		fmtDur(between.p50), fmtDur(between.p99), between.n)
}

func (r *report) resume(rr *resumeResult) {
	r.printf("\nresume: %d pending operations with %d-byte bodies; journal %s, same directory\n",
		rr.n, resumeBodyBytes, fmtBytes(uint64(rr.journalBytes)))
	rate := float64(rr.n) / rr.create.Seconds()
	r.printf("  create   %d POSTs at c=%d to a 503 endpoint, Options{MaxAttempts: 1}, each a *PendingError: %s (%.0f op/s)\n",
		rr.n, createConc, fmtDur(rr.create), rate)
	if rr.n < rr.wanted {
		r.printf("  NOTE     only %d of the %d asked for: -resume-budget %v ran out. At this rate %d would take %s to make;\n",
			rr.n, rr.wanted, r.cfg.resumeBudget, rr.wanted, fmtDur(time.Duration(float64(rr.wanted)/rate*float64(time.Second))))
		r.printf("           pass -resume-budget 0 to make them all, or -resume %d. The figures below are for %d.\n", rr.n, rr.n)
	} else if rr.create > time.Minute {
		r.printf("  note     making the backlog took over a minute here; pass -resume N for a smaller N\n")
	}
	r.printf("  figures  each the median over %d round(s); every pass resumes its own copy of the backlog, and plain\n", len(rr.warm))
	r.printf("           net/http sends the same POSTs in the same round (ratios paired per round, range in brackets)\n")
	r.pass("warm", "a copy just written, in the page cache", rr.n, rr.concurrency, rr.warm)
	if len(rr.cold) > 0 {
		r.pass("cold", "a copy whose pages were dropped from the page cache (posix_fadvise DONTNEED)", rr.n, rr.concurrency, rr.cold)
	} else {
		r.printf("  cold     not measured: %v\n", rr.evictErr)
	}
	r.plain(rr.n, rr.concurrency, rr.plain)
	r.resumeRatio("warm", rr.warm, rr.plain)
	if len(rr.cold) > 0 {
		r.resumeRatio("cold", rr.cold, rr.plain)
	}
	r.floorResume(rr)
	r.pass("wide", fmt.Sprintf("another copy, in the page cache, Options{ResumeConcurrency: %d}", wideConc), rr.n, wideConc, rr.wide)
	r.plain(rr.n, wideConc, rr.plainWide)
	r.resumeRatio("wide", rr.wide, rr.plainWide)
}

// resumeRatio prints Resume's time ÷ plain net/http's for the same sends,
// paired per round: the median and the range.
func (r *report) resumeRatio(name string, ps []resumePass, plain []sendRun) {
	xs := make([]float64, len(ps))
	for i := range ps {
		xs[i] = ps[i].done.Seconds() / plain[i].took.Seconds()
	}
	r.ratio(name+" Resume ÷ net/http sending the same", xs)
}

// ratio prints per-round ratios: their median and range.
func (r *report) ratio(what string, xs []float64) {
	r.printf("    ratio     %s: %.2fx [%.2f-%.2fx]\n", what, harness.Median(xs), slices.Min(xs), slices.Max(xs))
}

// floorResume prints the floor resume (floorresume.go) of the n POSTs, conc
// at a time, warm and cold, and its ratios, paired per round, to plain
// net/http's sends and to Resume's passes of the same kind.
func (r *report) floorResume(rr *resumeResult) {
	r.printf("  floor    the floor client's records of the same POSTs (floor.go), re-sent %d at a time, read %d per read\n", rr.concurrency, floorPage)
	r.printf("           transaction, each settled by a delete committed within %v; its file read in order first\n", floorFlush)
	r.floorPass("warm", "", rr.n, rr.floor, rr.warm, rr.plain)
	if len(rr.floorCold) > 0 {
		r.floorPass("cold", ", its pages dropped from the page cache first", rr.n, rr.floorCold, rr.cold, rr.plain)
	} else if rr.evictErr != nil {
		r.printf("    cold      not measured: %v\n", rr.evictErr)
	}
	r.contractResume(rr)
}

// floorPass prints the floor resumes of one kind (medians over rounds) and
// their ratios to plain and to Resume's passes of that kind, paired per
// round over the rounds that ran both.
func (r *report) floorPass(kind, what string, n int, ps []sendRun, resumes []resumePass, plain []sendRun) {
	r.sendPass(kind, what, n, ps)
	m := min(len(ps), len(resumes), len(plain))
	floor, resume := make([]float64, m), make([]float64, m)
	for i := range m {
		floor[i] = ps[i].took.Seconds() / plain[i].took.Seconds()
		resume[i] = resumes[i].done.Seconds() / ps[i].took.Seconds()
	}
	r.ratio(kind+" floor resume ÷ net/http sending the same", floor)
	r.ratio(kind+" Resume ÷ "+kind+" floor resume", resume)
}

// sendPass prints the medians over rounds of a floor resume's passes of one
// kind: time, rate, CPU and allocations per operation.
func (r *report) sendPass(kind, what string, n int, ps []sendRun) {
	took := harness.OverDur(ps, func(p sendRun) time.Duration { return p.took })
	r.printf("    %-9s %s%s (%.0f op/s; CPU per op: client %s, server %s; %s per op)\n", kind, fmtDur(took), what, float64(n)/took.Seconds(),
		perOp(harness.OverDur(ps, func(p sendRun) time.Duration { return p.cpu }), n),
		perOp(harness.OverDur(ps, func(p sendRun) time.Duration { return p.serverCPU }), n),
		overAllocs(ps, func(p sendRun) allocs { return p.alloc }).perOp(n))
}

// plain prints plain net/http sending the backlog's n POSTs, conc at a time:
// medians over rounds.
func (r *report) plain(n, conc int, ps []sendRun) {
	took := harness.OverDur(ps, func(p sendRun) time.Duration { return p.took })
	r.printf("  net/http the same %d POSTs sent by plain net/http, %d at a time: %s (%.0f op/s; CPU per POST: client %s, server %s; %s per POST)\n",
		n, conc, fmtDur(took), float64(n)/took.Seconds(),
		perOp(harness.OverDur(ps, func(p sendRun) time.Duration { return p.cpu }), n),
		perOp(harness.OverDur(ps, func(p sendRun) time.Duration { return p.serverCPU }), n),
		overAllocs(ps, func(p sendRun) allocs { return p.alloc }).perOp(n))
}

// perOp prints d shared among n operations.
func perOp(d time.Duration, n int) string { return fmtDur(d / time.Duration(max(n, 1))) }

// pass prints the rounds' Opens and Resumes of one kind: medians over
// rounds, and the counts of the round that answered fewest.
func (r *report) pass(name, what string, n, conc int, ps []resumePass) {
	dur := func(f func(resumePass) time.Duration) string { return fmtDur(harness.OverDur(ps, f)) }
	least := ps[0]
	for _, p := range ps {
		if p.ok < least.ok || p.resent < least.resent {
			least = p
		}
	}
	done := harness.OverDur(ps, func(p resumePass) time.Duration { return p.done })
	r.printf("  %-8s %s\n", name, what)
	r.printf("    open      idem.Open of the journal: %s\n", dur(func(p resumePass) time.Duration { return p.open }))
	r.printf("    first     first re-send %s after Resume started\n", dur(func(p resumePass) time.Duration { return p.listed }))
	r.printf("    started   every operation re-sent once %s after Resume started\n", dur(func(p resumePass) time.Duration { return p.started }))
	which := ""
	if conc == idem.DefaultResumeConcurrency {
		which = ", the default"
	}
	r.printf("    done      Resume returned after %s: %d re-sent, %d answered 201 (%.0f op/s; ResumeConcurrency %d%s)\n",
		fmtDur(done), least.resent, least.ok, float64(n)/done.Seconds(), conc, which)
	r.printf("    cpu       CPU per operation during Resume: client %s (getrusage of this process), server %s\n",
		perOp(harness.OverDur(ps, func(p resumePass) time.Duration { return p.cpu }), n),
		perOp(harness.OverDur(ps, func(p resumePass) time.Duration { return p.serverCPU }), n))
	r.printf("    allocs    per operation during Resume: %s (runtime.MemStats of this process)\n",
		overAllocs(ps, func(p resumePass) allocs { return p.alloc }).perOp(n))
	if least.firstErr != nil || least.resent != n {
		r.printf("    note      %d of %d not answered 201 (first: %v)\n", n-least.ok, n, least.firstErr)
	}
	r.printf("    heap      peak HeapInuse during Resume %s (%s before it), sampled every 10 ms\n",
		fmtBytes(uint64(harness.Over(ps, func(p resumePass) float64 { return float64(p.heapPeak) }))),
		fmtBytes(uint64(harness.Over(ps, func(p resumePass) float64 { return float64(p.heapBefore) }))))
}

func (r *report) total(d time.Duration) {
	r.printf("\ntotal run time %s\n", d.Round(100*time.Millisecond))
}

// fmtDur prints a duration with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func fmtBytes(b uint64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
