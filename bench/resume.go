// This file measures a restart with a backlog: with N operations left pending
// in a fresh journal (backlog.go), it times idem.Open of a copy of that
// journal and a Resume that re-sends them all, with the peak heap while
// Resume runs: once with the copy in the page cache (just written), once
// with a copy evicted from it (a restart after a reboot); then once more,
// warm, with ResumeConcurrency raised to wideConc. For scale, plain net/http
// sends the same N requests at each of those concurrencies in the same
// round, and the floor resume (floorresume.go) re-sends its own records of
// them, warm and cold. It runs -rounds such rounds, so that its ratios are
// paired per round as the other figures' are.
//
// Resumed requests keep their journaled URL, so the backlog is made against
// /held while the server holds it (503), and the server is released before
// Open (serve.go).

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/bench/internal/harness"
)

const resumeBodyBytes = 1 << 10

// resumeResult is the resume figure.
type resumeResult struct {
	wanted       int           // -resume
	n            int           // pending operations made: wanted, or fewer if creating them ran out of budget
	create       time.Duration // leaving n operations pending
	journalBytes int64
	concurrency  int   // Options.ResumeConcurrency in effect
	evictErr     error // why the cold passes did not run, if they did not
	// One of each per round (-rounds), each pass on its own copy of the
	// backlog, paired with plain net/http sending the same POSTs in the same
	// round, as the disk's and the machine's speed drift between rounds.
	warm, cold, wide []resumePass // a copy in the page cache; one evicted from it; warm, ResumeConcurrency wideConc
	plain, plainWide []sendRun    // plain net/http sending n such POSTs at concurrency, and wideConc at a time
	floor, floorCold []sendRun    // the floor resume (floorresume.go) of the same POSTs, at concurrency: warm, and cold as cold
	// contract, contractCold: the contract floor resume's (floorresume_contract.go), the same way
	contract, contractCold []sendRun
}

// sendRun is a run of sends of the backlog's POSTs, by plain net/http or
// the floor resume: how long it took, the client process's CPU time
// meanwhile (processCPU) and the server's (childCPU).
type sendRun struct {
	took, cpu, serverCPU time.Duration
	alloc                allocs // this process's, during the sends
}

// wideConc is the ResumeConcurrency of the third pass: as many at once as
// the backlog was made with.
const wideConc = createConc

// resumePass is one Open and Resume of the backlog.
type resumePass struct {
	open       time.Duration // idem.Open of the journal
	listed     time.Duration // Resume's start to its first re-send
	started    time.Duration // Resume's start to the last operation's first re-send: all started
	done       time.Duration // Resume's start to its return
	resent, ok int           // outcomes reported; of which answered 201
	firstErr   error         // first outcome that was not a 201
	heapBefore uint64        // HeapInuse after Open, before Resume
	heapPeak   uint64        // largest HeapInuse sampled during Resume
	cpu        time.Duration // the client process's CPU time during Resume (processCPU)
	alloc      allocs        // this process's allocations during Resume
	serverCPU  time.Duration // the server's CPU time during Resume (childCPU)
}

func runResume(ctx context.Context, cfg config, srv *child, dir string, progress io.Writer) (*resumeResult, error) {
	path := filepath.Join(dir, "resume.journal")
	rr := &resumeResult{wanted: cfg.resume, concurrency: idem.DefaultResumeConcurrency}

	if err := control(srv, pathHold); err != nil {
		return nil, err
	}
	t0 := time.Now()
	made, err := createPending(ctx, path, srv.url(pathHeld), cfg.resume, cfg.resumeBudget, progress)
	if err != nil {
		return nil, err
	}
	rr.create, rr.n = time.Since(t0), made
	if fi, err := os.Stat(path); err == nil {
		rr.journalBytes = fi.Size()
	}
	if err := control(srv, pathRelease); err != nil {
		return nil, err
	}
	if err := makeFloorBacklog(path+".floor", srv.url(pathHeld), resumeBody(resumeBodyBytes), rr.n); err != nil {
		return nil, err
	}
	if err := makeContractBacklog(path+".contract", srv.url(pathHeld), resumeBody(resumeBodyBytes), rr.n); err != nil {
		return nil, err
	}
	for i := range cfg.rounds {
		fmt.Fprintf(progress, "bench: resume round %d of %d\n", i+1, cfg.rounds)
		profile := ""
		if i == 0 {
			profile = cfg.resumeCPU
		}
		if err := resumeRound(ctx, rr, srv, path, profile); err != nil {
			return nil, err
		}
	}
	return rr, ctx.Err()
}

// resumeRound runs one round and appends its figures to rr: each pass
// resumes its own copy of the backlog at path (a pass settles what it
// resumes), plain net/http sends the same POSTs after the warm and the wide
// passes, and the floor resume re-sends a copy of its backlog (path.floor)
// after the warm and the cold ones.
func resumeRound(ctx context.Context, rr *resumeResult, srv *child, path, profile string) error {
	// copyOf copies src for one pass and, for a cold pass, drops the copy
	// from the page cache first. ok is false when the pass is not to run:
	// evicting failed, now or in an earlier round; then no later cold pass
	// runs, so that cold passes pair with the first rounds' plain sends.
	copyOf := func(src string, evictFirst bool) (cp string, ok bool, err error) {
		if evictFirst && rr.evictErr != nil {
			return "", false, nil
		}
		cp = src + ".copy"
		if err := copyFile(cp, src); err != nil {
			return cp, false, err
		}
		if evictFirst {
			if rr.evictErr = evict(cp); rr.evictErr != nil {
				return cp, false, nil
			}
		}
		return cp, true, nil
	}
	pass := func(passes *[]resumePass, conc int, evictFirst bool, profile string) error {
		cp, ok, err := copyOf(path, evictFirst)
		defer os.Remove(cp)
		if !ok {
			return err
		}
		cpu0 := childCPU(srv)
		p, err := resumeOnce(ctx, cp, conc, profile)
		p.serverCPU = childCPU(srv) - cpu0
		*passes = append(*passes, p)
		return err
	}
	plain := func(sends *[]sendRun, conc int) error {
		cpu0 := childCPU(srv)
		p, err := sendPlain(ctx, srv.url(pathHeld), rr.n, conc)
		p.serverCPU = childCPU(srv) - cpu0
		*sends = append(*sends, p)
		return err
	}
	floor := func(sends *[]sendRun, evictFirst bool, contract bool) error {
		src := path + ".floor"
		if contract {
			src = path + ".contract"
		}
		cp, ok, err := copyOf(src, evictFirst)
		defer os.Remove(cp)
		if !ok {
			return err
		}
		cpu0 := childCPU(srv)
		p, err := floorResumeOf(ctx, cp, tunedTransport(rr.concurrency), rr.n, rr.concurrency, contract)
		p.serverCPU = childCPU(srv) - cpu0
		*sends = append(*sends, p)
		return err
	}
	for _, step := range []func() error{
		func() error { return pass(&rr.warm, rr.concurrency, false, profile) },
		func() error { return plain(&rr.plain, rr.concurrency) },
		func() error { return floor(&rr.floor, false, false) },
		func() error { return floor(&rr.contract, false, true) },
		func() error { return pass(&rr.cold, rr.concurrency, true, "") },
		func() error { return floor(&rr.floorCold, true, false) },
		func() error { return floor(&rr.contractCold, true, true) },
		func() error { return pass(&rr.wide, wideConc, false, "") },
		func() error { return plain(&rr.plainWide, wideConc) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// resumeOnce opens the journal at path and resumes it, timing both; with a
// profile path, it writes a CPU profile of the Resume there.
func resumeOnce(ctx context.Context, path string, conc int, profile string) (resumePass, error) {
	var p resumePass
	sends := &sendTimes{base: tunedTransport(conc)}
	heapInuse() // a collection first, so Open starts from a quiet heap
	t0 := time.Now()
	c, err := idem.Open(path, &idem.Options{Base: sends, ResumeConcurrency: conc})
	if err != nil {
		return p, err
	}
	defer c.Close()
	p.open = time.Since(t0)

	p.heapBefore = heapInuse()
	stop := sampleHeap(10 * time.Millisecond)
	stopProfile, err := harness.CPUProfile(profile)
	if err != nil {
		return p, err
	}
	t0, cpu0, alloc0 := time.Now(), harness.ProcessCPU(), allocsNow()
	err = c.Resume(ctx, func(o idem.Outcome) {
		p.resent++
		if o.Err == nil {
			o.Err = drain(o.Response, http.StatusCreated)
		}
		if o.Err == nil {
			p.ok++
		} else if p.firstErr == nil {
			p.firstErr = o.Err
		}
	})
	p.done, p.cpu, p.alloc = time.Since(t0), harness.ProcessCPU()-cpu0, alloc0.since()
	p.heapPeak = stop()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return p, err
	}
	first, last := sends.span()
	if !first.IsZero() {
		p.listed, p.started = first.Sub(t0), last.Sub(t0)
	}
	return p, c.Close()
}

// sendTimes is a RoundTripper that notes when its first and last requests
// went out. Resume reads pending records a page at a time and sends as it
// goes, so the first is when its first page was read; every operation here
// is answered at its first re-send, so the last is when all had started.
type sendTimes struct {
	base        http.RoundTripper
	mu          sync.Mutex
	first, last time.Time
}

func (s *sendTimes) RoundTrip(r *http.Request) (*http.Response, error) {
	now := time.Now()
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = now
	}
	s.last = now
	s.mu.Unlock()
	return s.base.RoundTrip(r)
}

// span returns the times of the first and last requests (zero if none).
func (s *sendTimes) span() (first, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, s.last
}

// sendPlain sends n POSTs of the resume body to url with plain net/http, conc
// at a time, and returns how long they took and the CPU time they cost.
func sendPlain(ctx context.Context, url string, n, conc int) (sendRun, error) {
	send := sender(&http.Client{Transport: tunedTransport(conc)}, http.MethodPost, url,
		resumeBody(resumeBodyBytes), http.StatusCreated)
	var next atomic.Int64
	errs := make([]error, conc)
	var wg sync.WaitGroup
	t0, cpu0, alloc0 := time.Now(), harness.ProcessCPU(), allocsNow()
	for i := range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && errs[i] == nil {
				errs[i] = send(ctx)
			}
		})
	}
	wg.Wait()
	sent := sendRun{took: time.Since(t0), cpu: harness.ProcessCPU() - cpu0, alloc: alloc0.since()}
	for _, err := range errs {
		if err != nil {
			return sendRun{}, err
		}
	}
	return sent, nil
}

// copyFile copies the file at src to a new file at dst, fsynced.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
