// This file holds the demo's worker: the child process that sends payments
// through idem and gets SIGKILLed by the demo (demo.go). On every start it
// resumes what its previous life left pending, then carries on.

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/pgjournal"
)

// workerCommand is the hidden subcommand the demo starts itself with.
const workerCommand = "demo-worker"

// The worker prints one event per line on stdout for the demo to count and
// trace (PAYID is the server's payment id, KEY the idempotency key, HOW "new"
// or "replayed" from the Idempotent-Replayed header):
//
//	start   OPID UNIXNANO                  a call begins, at this time
//	settled OPID STATUS PAYID KEY HOW      a call got its final answer
//	pending OPID                           a call ended with its outcome unknown
//	resumed OPID STATUS PAYID KEY HOW      Resume got a final answer
//	resumed OPID pending|expired|error ...
//	gaveup  OPID                           (plain worker) retries used up
//	phase   resuming|sending|finishing     what the worker does now
//	done                                   every operation finished
const demoSecret = "Bearer demo-secret-never-journaled"

func runWorker(args []string) error {
	fs := flag.NewFlagSet(workerCommand, flag.ContinueOnError)
	url := fs.String("url", "", "testserver URL")
	path := fs.String("journal", "", "journal file (with -plain: the file of payments done)")
	n := fs.Int("n", 200, "operations")
	conc := fs.Int("concurrency", 8, "concurrent operations")
	attemptTimeout := fs.Duration("attempt-timeout", time.Second, "per-attempt timeout")
	plain := fs.Bool("plain", false, "send through a plain retrying net/http client instead of idem")
	reconcile := fs.Bool("reconcile", false, "look a payment up by its reference before idem sends it again (Options.Reconcile)")
	slot := fs.Int("slot", 0, "(fleet) this worker's number, from 0: where its walk through the payments starts")
	workers := fs.Int("workers", 1, "(fleet) how many workers share the journal")
	lease := fs.Duration("lease", pgjournal.DefaultLease, "(fleet) the PostgreSQL journal's lease")
	from := fs.Int("from", 0, "(soak) the first payment to send, with -until; those below -n are sent even past -until")
	until := fs.Int64("until", 0, "(soak) send payments until this Unix time in nanoseconds, then finish; 0 for -n payments")
	retention := fs.Duration("retention", 0, "(soak) the journal's Retention and KeyTTL; 0 for the defaults")
	statsEvery := fs.Duration("stats", 0, "(soak) print a stats line this often (worker_soak.go); 0 for none")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// Ctrl-C in a terminal reaches the whole process group: the demo decides
	// what happens then (its summary so far) and kills this process itself.
	signal.Ignore(os.Interrupt)
	if *plain {
		return runPlainWorker(*url, *path, *n, *conc, *attemptTimeout)
	}
	if isPostgres(*path) {
		return runFleetWorker(*path, *url, *n, *conc, *slot, *workers, *attemptTimeout, *lease)
	}
	opts := &idem.Options{
		AttemptTimeout:  *attemptTimeout,
		InitialInterval: 100 * time.Millisecond,
		MaxInterval:     2 * time.Second,
		PrepareResume: func(r *http.Request) error {
			r.Header.Set("Authorization", demoSecret)
			return nil
		},
	}
	if *reconcile {
		opts.Reconcile = reconcileByReference(*url)
	}
	if *retention > 0 {
		opts.Journal.Retention, opts.KeyTTL = *retention, *retention
	}
	if *until > 0 {
		opts.ResumeInterval = 2 * time.Second
	}
	stats := &workerStats{}
	if *statsEvery > 0 {
		opts.Observer = stats
	}
	c, err := idem.Open(*path, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	w := &worker{client: c, http: c.HTTPClient(), url: *url, out: newLineWriter(os.Stdout)}
	ctx := context.Background()
	if *statsEvery > 0 {
		go stats.report(ctx, w.out, *statsEvery)
	}
	w.out.printf("phase resuming")
	if err := w.resume(ctx); err != nil {
		return err
	}
	w.out.printf("phase sending")
	if *until > 0 {
		// A long-running sender resumes what it left pending as it goes, as a
		// service would, rather than only when it restarts.
		stop := c.StartResumer(ctx, w.report)
		w.sendSeq(ctx, w.soakOps(*from, *n, time.Unix(0, *until)), *conc)
		stop()
	} else {
		w.sendAll(ctx, w.unsettled(*n), *conc)
	}
	w.out.printf("phase finishing")
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
	client *idem.Client // nil for a fleet worker (worker_fleet.go)
	http   *http.Client
	url    string
	out    *lineWriter
}

func (w *worker) resume(ctx context.Context) error {
	return w.client.Resume(ctx, w.report)
}

// report prints one of Resume's outcomes.
func (w *worker) report(o idem.Outcome) {
	var pe *idem.PendingError
	switch {
	case o.Response != nil:
		w.out.printf("resumed %s %s", o.Record.OperationID, answerOf(o.Response, o.Record.Key))
	case errors.As(o.Err, &pe):
		w.out.printf("resumed %s pending", o.Record.OperationID)
	case errors.Is(o.Err, idem.ErrKeyExpired):
		w.out.printf("resumed %s expired", o.Record.OperationID)
	default:
		w.out.printf("resumed %s error %v", o.Record.OperationID, o.Err)
	}
}

// unsettled returns the payments of n that the journal does not show as
// settled.
func (w *worker) unsettled(n int) []int {
	var ops []int
	for i := range n {
		if rec, err := w.client.Journal().Lookup(opID(i)); err == nil && rec != nil && rec.State == idem.StateSettled {
			continue
		}
		ops = append(ops, i)
	}
	return ops
}

// sendAll sends the payments ops, conc at a time.
func (w *worker) sendAll(ctx context.Context, ops []int, conc int) {
	w.sendSeq(ctx, slices.Values(ops), conc)
}

// sendSeq sends the payments ops yields, conc at a time.
func (w *worker) sendSeq(ctx context.Context, ops iter.Seq[int], conc int) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(conc, 1) {
		wg.Go(func() {
			for i := range jobs {
				w.send(ctx, i)
			}
		})
	}
	for i := range ops {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

func opID(i int) string      { return fmt.Sprintf("order-%04d/charge", i) }
func reference(i int) string { return fmt.Sprintf("order-%04d", i) }

// paymentBody is payment i's request body, the same in both workers.
func paymentBody(i int) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"eur","reference":%q}`, 1000+i, reference(i))
}

// answerOf reads, drains and closes a final response, and returns what the
// worker prints of it: STATUS PAYID KEY new|replayed.
func answerOf(resp *http.Response, key string) string {
	var p struct {
		ID string `json:"id"`
	}
	json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&p)
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	how := "new"
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		how = "replayed"
	}
	return fmt.Sprintf("%d %s %s %s", resp.StatusCode, cmp.Or(p.ID, "-"), cmp.Or(key, "-"), how)
}

func (w *worker) send(ctx context.Context, i int) {
	w.out.printf("start %s %d", opID(i), time.Now().UnixNano())
	req, err := http.NewRequestWithContext(idem.WithOperationID(ctx, opID(i)),
		http.MethodPost, w.url+"/payments", strings.NewReader(paymentBody(i)))
	if err != nil {
		w.out.printf("error %s %v", opID(i), err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", demoSecret)
	resp, err := w.http.Do(req)
	var pe *idem.PendingError
	switch {
	case err == nil:
		info, _ := idem.ResponseInfo(resp)
		w.out.printf("settled %s %s", opID(i), answerOf(resp, info.Key))
	case errors.As(err, &pe):
		w.out.printf("pending %s", opID(i))
	default:
		w.out.printf("error %s %v", opID(i), err)
	}
}

func pendingCount(j *boltjournal.Journal) (int, error) {
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
