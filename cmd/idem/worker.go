// This file holds the demo's worker: the child process that sends payments
// through idem and gets SIGKILLed by the demo (demo.go). On every start it
// resumes what its previous life left pending, then carries on.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/idem-go/idem"
)

// workerCommand is the hidden subcommand the demo starts itself with.
const workerCommand = "demo-worker"

// The worker prints one event per line on stdout for the demo to count:
//
//	resumed OPID STATUS|pending|expired|error
//	settled OPID STATUS
//	pending OPID
//	done    (every operation settled)
const demoSecret = "Bearer demo-secret-never-journaled"

func runWorker(args []string) error {
	fs := flag.NewFlagSet(workerCommand, flag.ContinueOnError)
	url := fs.String("url", "", "testserver URL")
	path := fs.String("journal", "", "journal file")
	n := fs.Int("n", 200, "operations")
	conc := fs.Int("concurrency", 8, "concurrent operations")
	attemptTimeout := fs.Duration("attempt-timeout", time.Second, "per-attempt timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := idem.Open(*path, &idem.Options{
		AttemptTimeout:  *attemptTimeout,
		InitialInterval: 100 * time.Millisecond,
		MaxInterval:     2 * time.Second,
		PrepareResume: func(r *http.Request) error {
			r.Header.Set("Authorization", demoSecret)
			return nil
		},
	})
	if err != nil {
		return err
	}
	defer c.Close()
	w := &worker{client: c, url: *url, out: newLineWriter(os.Stdout)}
	ctx := context.Background()
	if err := w.resume(ctx); err != nil {
		return err
	}
	w.sendAll(ctx, *n, *conc)
	// Whatever is still pending (a server Retry-After, attempts used up) is
	// resumed until it settles; the deadline only keeps a broken run bounded.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		left, err := pendingCount(c.Journal())
		if err != nil {
			return err
		}
		if left == 0 {
			w.out.printf("done")
			return nil
		}
		time.Sleep(200 * time.Millisecond)
		if err := w.resume(ctx); err != nil {
			return err
		}
	}
	return errors.New("operations still pending after 60s")
}

type worker struct {
	client *idem.Client
	url    string
	out    *lineWriter
}

func (w *worker) resume(ctx context.Context) error {
	return w.client.Resume(ctx, func(o idem.Outcome) {
		var pe *idem.PendingError
		switch {
		case o.Response != nil:
			io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
			w.out.printf("resumed %s %d", o.Record.OperationID, o.Response.StatusCode)
		case errors.As(o.Err, &pe):
			w.out.printf("resumed %s pending", o.Record.OperationID)
		case errors.Is(o.Err, idem.ErrKeyExpired):
			w.out.printf("resumed %s expired", o.Record.OperationID)
		default:
			w.out.printf("resumed %s error %v", o.Record.OperationID, o.Err)
		}
	})
}

// sendAll sends every operation the journal does not show as settled.
func (w *worker) sendAll(ctx context.Context, n, conc int) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(conc, 1) {
		wg.Go(func() {
			for i := range jobs {
				w.send(ctx, i)
			}
		})
	}
	for i := range n {
		if rec, err := w.client.Journal().Lookup(opID(i)); err == nil && rec != nil && rec.State == idem.StateSettled {
			continue
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

func opID(i int) string      { return fmt.Sprintf("order-%04d/charge", i) }
func reference(i int) string { return fmt.Sprintf("order-%04d", i) }

func (w *worker) send(ctx context.Context, i int) {
	body := fmt.Sprintf(`{"amount":%d,"currency":"eur","reference":%q}`, 1000+i, reference(i))
	req, err := http.NewRequestWithContext(idem.WithOperationID(ctx, opID(i)),
		http.MethodPost, w.url+"/payments", strings.NewReader(body))
	if err != nil {
		w.out.printf("error %s %v", opID(i), err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", demoSecret)
	resp, err := w.client.HTTPClient().Do(req)
	var pe *idem.PendingError
	switch {
	case err == nil:
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.out.printf("settled %s %d", opID(i), resp.StatusCode)
	case errors.As(err, &pe):
		w.out.printf("pending %s", opID(i))
	default:
		w.out.printf("error %s %v", opID(i), err)
	}
}

func pendingCount(j *idem.Journal) (int, error) {
	recs, err := j.Records()
	n := 0
	for _, r := range recs {
		if r.State == idem.StatePending {
			n++
		}
	}
	return n, err
}

// lineWriter writes whole lines from many goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func newLineWriter(w io.Writer) *lineWriter { return &lineWriter{w: w} }

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}
