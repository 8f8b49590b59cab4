// This file builds the clients under test. Each is one function that sends a
// request, reads the whole response and checks its status, so every client
// does the same work around the call itself.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
)

// client is one row of a table.
type client struct {
	name string
	do   func(ctx context.Context) error
	// commits, set for journaled rows, returns the journal's counters so
	// far: commits/op and pages/commit are their ratios over a window.
	commits func() journalCounts
	// writeAheads times the journaled rows' write-ahead commits, as
	// idem's Observer reports them.
	writeAheads *writeAheadTimes
	// pg, set for the PostgreSQL rows, returns their pool's counters so far (pgcount.go).
	pg func() pgCounts
}

// clientSet is the clients of one run and what they hold open.
type clientSet struct {
	rows  []client
	idem  *idem.Client
	floor *floorTransport
	// contract is the contract floor (floor_contract.go).
	contract *floorTransport
	closePG  func() error // nil without -postgres
}

func (s *clientSet) close() error {
	err := errors.Join(s.idem.Close(), s.floor.Close(), s.contract.Close())
	if s.closePG != nil {
		err = errors.Join(err, s.closePG())
		s.closePG = nil
	}
	return err
}

// tunedTransport is http.DefaultTransport with room for every concurrent
// request in its idle pool, so no run pays for new connections: the default
// MaxIdleConnsPerHost of 2 would close and redial most connections at
// concurrency 16 and 64.
func tunedTransport(maxConc int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxConc
	t.MaxIdleConns = max(t.MaxIdleConns, maxConc)
	return t
}

// newClients opens the idem journal and the floor client's (floor.go) in
// dir and builds every row, in the order of the tables; with a postgres
// URL, the PostgreSQL row last.
func newClients(ctx context.Context, srv *child, dir, postgres string, maxConc int) (*clientSet, error) {
	tuned := tunedTransport(maxConc)
	plain := &http.Client{Transport: tuned}

	rc := retryablehttp.NewClient() // its own go-cleanhttp pooled transport
	rc.Logger = nil                 // the default logs a line per request
	retrying := rc.StandardClient()

	wa := &writeAheadTimes{}
	ic, err := idem.Open(filepath.Join(dir, "bench.journal"), &idem.Options{Base: tuned, Observer: wa})
	if err != nil {
		return nil, err
	}
	journaled := ic.HTTPClient()
	floor, err := newFloor(filepath.Join(dir, "floor.journal"), tuned)
	if err != nil {
		ic.Close()
		return nil, err
	}

	contract, err := newContractFloor(filepath.Join(dir, "contract.journal"), tuned)
	if err != nil {
		ic.Close()
		floor.Close()
		return nil, err
	}

	url := srv.url(pathPayments)
	set := &clientSet{idem: ic, floor: floor, contract: contract, rows: []client{
		{name: "net/http GET", do: sender(plain, http.MethodGet, url, nil, http.StatusOK)},
		{name: "idem GET", do: sender(journaled, http.MethodGet, url, nil, http.StatusOK)},
		{name: contractGETRow, do: sender(&http.Client{Transport: getContractFloor{base: tuned}}, http.MethodGet, url, nil, http.StatusOK)},
		{name: "net/http POST", do: sender(plain, http.MethodPost, url, paymentBody, http.StatusCreated)},
		{name: "retryablehttp POST", do: sender(retrying, http.MethodPost, url, paymentBody, http.StatusCreated)},
		{name: "idem POST", do: sender(journaled, http.MethodPost, url, paymentBody, http.StatusCreated), commits: boltCommits(ic.Journal()), writeAheads: wa},
		{name: floorRow, do: sender(&http.Client{Transport: floor}, http.MethodPost, url, paymentBody, http.StatusCreated), commits: floor.stats},
		{name: contractRow, do: sender(&http.Client{Transport: contract}, http.MethodPost, url, paymentBody, http.StatusCreated), commits: contract.stats},
	}}
	if postgres != "" {
		rows, closePG, err := postgresRows(ctx, postgres, tuned, maxConc, url)
		if err != nil {
			set.close()
			return nil, err
		}
		set.rows, set.closePG = append(set.rows, rows...), closePG
	}
	return set, nil
}

// sender returns a function that sends one request as an application would:
// a fresh *http.Request, the body as a bytes.Reader, the response read to the
// end and closed.
func sender(hc *http.Client, method, url string, body []byte, want int) func(context.Context) error {
	return func(ctx context.Context) error {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, url, r)
		if err != nil {
			return err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		return drain(resp, want)
	}
}

// drain reads a response to the end, so its connection is reused, closes it,
// and compares its status with the one wanted.
func drain(resp *http.Response, want int) error {
	_, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return err
	case resp.StatusCode != want:
		return fmt.Errorf("status %d, want %d", resp.StatusCode, want)
	}
	return nil
}

// writeAheadTimes is an idem.Observer that keeps the durations of write-ahead
// commits (Observer.WriteAhead: the commit on the request path, fsync
// included). It is safe for concurrent use.
type writeAheadTimes struct {
	idem.NopObserver
	mu   sync.Mutex
	hist histogram
}

func (w *writeAheadTimes) WriteAhead(_ context.Context, d time.Duration, err error) {
	if err != nil {
		return
	}
	w.mu.Lock()
	w.hist.record(d)
	w.mu.Unlock()
}

// take returns what was recorded since the last take, and starts afresh.
func (w *writeAheadTimes) take() histogram {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hist
	w.hist = histogram{}
	return h
}

// journalCounts are a journal's counters: its commits, the records written
// ahead, the pages its commits wrote, the wall time of its commits and the
// part of it bbolt spent writing and fsyncing (pages and times 0 where not
// known: PostgreSQL).
type journalCounts struct {
	commits, writeAheads, pages uint64
	commitTime, writeTime       time.Duration
}

// since returns the counts from b to c.
func (c journalCounts) since(b journalCounts) journalCounts {
	return journalCounts{c.commits - b.commits, c.writeAheads - b.writeAheads, c.pages - b.pages,
		c.commitTime - b.commitTime, c.writeTime - b.writeTime}
}

// boltCommits reads the bbolt journal's Stats.
func boltCommits(j *boltjournal.Journal) func() journalCounts {
	return func() journalCounts {
		st := j.Stats()
		return journalCounts{st.Commits, st.WriteAheads, st.PagesWritten, st.CommitTime, st.WriteTime}
	}
}
