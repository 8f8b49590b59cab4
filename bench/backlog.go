// This file makes the resume figure's backlog (resume.go): operations left
// pending in a fresh journal, made through the public API only, as fast as it
// allows.

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem"
)

const createConc = 64

// createPending leaves n operations pending in a new journal at path: each
// POST to url meets a 503 and, with one attempt allowed, returns a
// *idem.PendingError. A 1 ms backoff makes them due for Resume at once. It
// stops early once budget (if positive) has passed, and returns how many it
// made.
func createPending(ctx context.Context, path, url string, n int, budget time.Duration, progress io.Writer) (int, error) {
	c, err := idem.Open(path, &idem.Options{Base: tunedTransport(createConc),
		MaxAttempts: 1, InitialInterval: time.Millisecond})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	send := sender(c.HTTPClient(), http.MethodPost, url, resumeBody(resumeBodyBytes), http.StatusCreated)

	var (
		next, made atomic.Int64
		stop       atomic.Bool
		mu         sync.Mutex
		firstErr   error
		wg         sync.WaitGroup
	)
	start := time.Now()
	for range createConc {
		wg.Go(func() {
			for !stop.Load() && next.Add(1) <= int64(n) && ctx.Err() == nil {
				var pending *idem.PendingError
				if err := send(ctx); !errors.As(err, &pending) {
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("want *idem.PendingError, got %v", err))
					mu.Unlock()
					stop.Store(true)
					return
				}
				made.Add(1)
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	var out <-chan time.Time
	if budget > 0 {
		out = time.After(budget)
	}
	for {
		select {
		case <-finished:
			if firstErr != nil {
				return 0, firstErr
			}
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return int(made.Load()), c.Close()
		case <-out:
			fmt.Fprintf(progress, "bench: -resume-budget %v reached, stopping at %d pending\n", budget, made.Load())
			stop.Store(true)
		case <-tick.C:
			m, el := made.Load(), time.Since(start)
			rate := float64(m) / el.Seconds()
			left := "?"
			if m > 0 {
				left = (time.Duration(float64(int64(n)-m)/rate) * time.Second).String()
			}
			fmt.Fprintf(progress, "bench: %d/%d pending after %v (%.0f op/s, about %s to go)\n",
				m, n, el.Round(time.Second), rate, left)
		}
	}
}

// control posts to one of the server's control paths.
func control(srv *child, path string) error {
	resp, err := http.Post(srv.url(path), "", nil)
	if err != nil {
		return err
	}
	return drain(resp, http.StatusNoContent)
}
