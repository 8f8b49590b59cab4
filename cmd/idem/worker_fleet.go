// This file holds the fleet worker: one of the processes "idem chaos
// -journal postgres://… -workers N" (chaos_fleet.go) runs side by side on
// one PostgreSQL journal. Each walks every payment from its own starting
// point, sending those the journal does not hold yet, while a background
// resumer adopts what dead workers left pending. Besides worker.go's lines
// it prints one per attempt, for the parent to see who re-sent what:
//
//	attempt REF KEY UNIXNANO     this process sends an attempt of REF with KEY

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/idem-go/idem"
)

// fleetWorker is a worker on a PostgreSQL journal shared with others.
type fleetWorker struct {
	worker
	target *pgTarget
}

func runFleetWorker(journalURL, url string, n, conc, slot, workers int, attemptTimeout, lease time.Duration) error {
	t, err := parsePostgres(journalURL)
	if err != nil {
		return err
	}
	t.opts.Lease = lease
	ctx := context.Background()
	// A worker started while the database restarts waits for it, as a
	// service's instance would, up to a minute.
	pool, j, err := t.open(ctx, true)
	for deadline := time.Now().Add(time.Minute); err != nil && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		pool, j, err = t.open(ctx, true)
	}
	if err != nil {
		return err
	}
	defer pool.Close()
	defer j.Close()
	out := newLineWriter(os.Stdout)
	tr, err := idem.NewTransport(j, &idem.Options{
		Base:            &attemptReporter{base: http.DefaultTransport.(*http.Transport).Clone(), out: out},
		AttemptTimeout:  attemptTimeout,
		InitialInterval: 100 * time.Millisecond,
		MaxInterval:     2 * time.Second,
		ResumeInterval:  lease / 4, // how often a survivor looks for expired leases
		PrepareResume: func(r *http.Request) error {
			r.Header.Set("Authorization", demoSecret)
			return nil
		},
	})
	if err != nil {
		return err
	}
	w := &fleetWorker{worker: worker{url: url, out: out, http: &http.Client{Transport: tr}}, target: t}
	stop := tr.StartResumer(ctx, w.report)
	defer stop()
	order := make([]int, n) // every payment, from this worker's share on
	for k := range order {
		order[k] = (slot*n/workers + k) % n
	}
	for _, phase := range []string{"sending", "finishing"} {
		out.printf("phase %s", phase)
		if err := w.sendUnknown(ctx, order, conc); err != nil {
			return err
		}
	}
	// Whatever is still pending is leased by a live worker, or waits for a
	// dead one's lease to run out and for a resumer to adopt it.
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		left, err := j.PendingCount(ctx)
		if err == nil && left == 0 {
			// A write-ahead refused while the database was away left its
			// payment out of the journal: send those now.
			missing, err := w.unknown(ctx, order)
			if err == nil && len(missing) == 0 {
				out.printf("done")
				return nil
			}
			w.sendAll(ctx, missing, conc)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("operations still pending after 3 minutes")
}

// sendUnknown sends, conc at a time, the payments of order the journal
// does not hold, checking the journal again every 64 payments so that what
// other workers sent meanwhile is skipped.
func (w *fleetWorker) sendUnknown(ctx context.Context, order []int, conc int) error {
	for start := 0; start < len(order); start += 64 {
		batch := order[start:min(start+64, len(order))]
		todo, err := w.unknown(ctx, batch)
		if err != nil {
			w.out.printf("error - %v", err) // the database is away: try the batch anyway
			todo = batch
		}
		w.sendAll(ctx, todo, conc)
	}
	return nil
}

// unknown returns the payments of ops the journal holds no operation for.
func (w *fleetWorker) unknown(ctx context.Context, ops []int) ([]int, error) {
	recs, err := w.target.records(ctx, false)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, r := range recs {
		known[r.OperationID] = true
	}
	var out []int
	for _, i := range ops {
		if !known[opID(i)] {
			out = append(out, i)
		}
	}
	return out, nil
}

// report prints a background resumer's outcome.
func (w *fleetWorker) report(o idem.Outcome) {
	if o.Record == nil {
		w.out.printf("error - resumer: %v", o.Err)
		return
	}
	w.worker.report(o)
}

// attemptReporter prints an attempt line for each keyed request it sends.
type attemptReporter struct {
	base http.RoundTripper
	out  *lineWriter
}

func (a *attemptReporter) RoundTrip(req *http.Request) (*http.Response, error) {
	if key := req.Header.Get("Idempotency-Key"); key != "" && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			var p struct{ Reference string }
			json.NewDecoder(io.LimitReader(body, 1<<16)).Decode(&p)
			body.Close()
			a.out.printf("attempt %s %s %d", orDash(p.Reference), key, time.Now().UnixNano())
		}
	}
	return a.base.RoundTrip(req)
}

// fleetArgs are the worker flags of a fleet worker, for chaos_fleet.go.
func fleetArgs(slot, workers int, lease time.Duration) []string {
	return []string{"-slot", fmt.Sprint(slot), "-workers", fmt.Sprint(workers), "-lease", lease.String()}
}
