// This file measures a restart with a backlog: with N operations left pending
// in a fresh journal (backlog.go), it times idem.Open of that journal and a
// Resume that re-sends them all, with the peak heap while Resume runs.
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
	"sync/atomic"
	"time"

	"github.com/idem-go/idem"
)

const resumeBodyBytes = 1 << 10

// resumeResult is the resume figure.
type resumeResult struct {
	wanted       int           // -resume
	n            int           // pending operations made: wanted, or fewer if creating them ran out of budget
	create       time.Duration // leaving n operations pending
	journalBytes int64
	open         time.Duration // idem.Open of the journal
	listed       time.Duration // Resume's start to its first re-send
	done         time.Duration // Resume's start to its return
	resent, ok   int           // outcomes reported; of which answered 201
	firstErr     error         // first outcome that was not a 201
	heapBefore   uint64        // HeapInuse after Open, before Resume
	heapPeak     uint64        // largest HeapInuse sampled during Resume
	concurrency  int           // Options.ResumeConcurrency in effect
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

	first := &firstSend{base: tunedTransport(rr.concurrency)}
	heapInuse() // a collection first, so Open starts from a quiet heap
	t0 = time.Now()
	c, err := idem.Open(path, &idem.Options{Base: first})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rr.open = time.Since(t0)

	fmt.Fprintf(progress, "bench: resuming %d pending operations\n", rr.n)
	rr.heapBefore = heapInuse()
	stop := sampleHeap(10 * time.Millisecond)
	t0 = time.Now()
	err = c.Resume(ctx, func(o idem.Outcome) {
		rr.resent++
		if o.Err == nil {
			o.Err = drain(o.Response, http.StatusCreated)
		}
		if o.Err == nil {
			rr.ok++
		} else if rr.firstErr == nil {
			rr.firstErr = o.Err
		}
	})
	rr.done = time.Since(t0)
	rr.heapPeak = stop()
	if err != nil {
		return nil, err
	}
	if at := first.at(); !at.IsZero() {
		rr.listed = at.Sub(t0)
	}
	return rr, ctx.Err()
}

// firstSend is a RoundTripper that notes when its first request went out.
// Resume reads pending records a page at a time and sends as it goes, so
// that moment is when its first page was read.
type firstSend struct {
	base  http.RoundTripper
	first atomic.Pointer[time.Time]
}

func (f *firstSend) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.first.Load() == nil {
		now := time.Now()
		f.first.CompareAndSwap(nil, &now)
	}
	return f.base.RoundTrip(r)
}

// at returns the time of the first request, or the zero time if none went out.
func (f *firstSend) at() time.Time {
	if t := f.first.Load(); t != nil {
		return *t
	}
	return time.Time{}
}
