// This file is the load generator, in the parent process: c goroutines post
// the payment back to back to one row's path through plain net/http, each
// request with a fresh random Idempotency-Key, for a fixed window; the child's
// counters are read around the window (stats.go).

package serverbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
)

// load sends the requests. It is used by one window at a time.
type load struct {
	srv *child
	hc  *http.Client
	tr  *http.Transport
}

// newLoad returns a load generator whose transport keeps an idle connection
// for every concurrent request (http.DefaultTransport's 2 per host would
// redial most of them at c=16 and c=64).
func newLoad(srv *child, maxConc int) *load {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxConc
	tr.MaxIdleConns = max(tr.MaxIdleConns, maxConc)
	return &load{srv: srv, hc: &http.Client{Transport: tr}, tr: tr}
}

func (l *load) close() { l.tr.CloseIdleConnections() }

// window is what one measured window saw.
type window struct {
	requests uint64 // answered 201
	errors   uint64
	firstErr error
	elapsed  time.Duration
	lat      []time.Duration // of each request answered 201, sorted
	server   childStats      // the child's counters over the window
}

func (w *window) reqPerSec() float64 { return float64(w.requests) / w.elapsed.Seconds() }

// perReq is v over the window ÷ the requests answered.
func (w *window) perReq(v uint64) float64 { return float64(v) / float64(max(w.requests, 1)) }

// quantile returns the q-quantile (0 < q <= 1) of the latencies, or 0.
func (w *window) quantile(q float64) time.Duration {
	if len(w.lat) == 0 {
		return 0
	}
	i := int(q*float64(len(w.lat))+0.5) - 1
	return w.lat[min(max(i, 0), len(w.lat)-1)]
}

// measure sends to rw's path with c goroutines for d. With stats, it reads
// the child's counters before (after a collection) and after the window.
func (l *load) measure(ctx context.Context, rw row, c int, d time.Duration, stats bool) (*window, error) {
	url := l.srv.url(rw.path)
	var before childStats
	if stats {
		var err error
		if before, err = l.stats(ctx, true); err != nil {
			return nil, err
		}
	}
	lats := make([][]time.Duration, c)
	for i := range lats {
		lats[i] = make([]time.Duration, 0, 1024)
	}
	ws := harness.NewWorkers(c)
	post := func(ctx context.Context) error { return l.post(ctx, url) }
	record := func(i int, lat time.Duration) { lats[i] = append(lats[i], lat) }
	win := &window{elapsed: ws.Run(ctx, d, post, record)}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if stats {
		after, err := l.stats(ctx, false)
		if err != nil {
			return nil, err
		}
		win.server = after.since(before)
	}
	win.errors, win.firstErr = ws.Errors()
	for _, lat := range lats {
		win.lat = append(win.lat, lat...)
	}
	win.requests = uint64(len(win.lat))
	slices.Sort(win.lat)
	return win, nil
}

// post sends one payment with a fresh key and reads the whole answer, which
// must be 201 and not a replay.
func (l *load) post(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(paymentBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(keyHeader, rand.Text())
	resp, err := l.hc.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusCreated:
		return fmt.Errorf("status %d, want 201", resp.StatusCode)
	case resp.Header.Get("Idempotent-Replayed") != "":
		return fmt.Errorf("a fresh key's answer was a replay")
	}
	return nil
}

// stats reads the child's counters, after a collection if gc.
func (l *load) stats(ctx context.Context, gc bool) (childStats, error) {
	url := l.srv.url(pathStats)
	if gc {
		url += "?gc=1"
	}
	var st childStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return st, err
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return st, fmt.Errorf("serverbench: the child's counters: %w", err)
	}
	defer func() {
		io.Copy(io.Discard, resp.Body) // so that the connection is reused
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("serverbench: the child's counters: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("serverbench: the child's counters: %w", err)
	}
	return st, nil
}
