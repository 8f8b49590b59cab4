// Tests of the Client, idem's high-level face (client.go, resumer.go),
// through its public API only: Open and its errors, HTTPClient against the
// testserver, Resume after a reopen, the background resumer, and Close.
// Everything runs against a real loopback server; waits are bounded polls.

package idem_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/memjournal"
)

func TestOpenCreatesPrivateJournal(t *testing.T) {
	t.Parallel()
	path := newJournalPath(t)
	c, err := idem.Open(path, nil)
	require.NoError(t, err)

	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the journal holds request bodies")
	require.Equal(t, path, c.Journal().Path())
	recs, err := c.Journal().Records()
	require.NoError(t, err)
	require.Empty(t, recs)
	require.NoError(t, c.Close())

	// Reopened, the file keeps its mode and is still a journal.
	openClient(t, path, nil)
	fi, err = os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestOpenSamePathTwiceIsLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "payments.journal")
	c, err := idem.Open(path, nil)
	require.NoError(t, err)

	// Another spelling of the same file is the same journal. Within one
	// process the answer is immediate, whatever OpenTimeout says.
	for _, p := range []string{path, filepath.Join(dir, ".", "payments.journal")} {
		start := time.Now()
		c2, err := idem.Open(p, &idem.Options{Journal: boltjournal.Options{OpenTimeout: 30 * time.Second}})
		require.Nil(t, c2)
		require.ErrorIs(t, err, journal.ErrLocked)
		require.Contains(t, err.Error(), p, "the error names the path")
		require.Less(t, time.Since(start), 5*time.Second, "a locked journal never hangs Open")

		j, err := boltjournal.Open(p, nil)
		require.Nil(t, j)
		require.ErrorIs(t, err, journal.ErrLocked)
	}

	// The refused Opens took nothing: once closed, the path opens again.
	require.NoError(t, c.Close())
	openClient(t, path, nil)
}

func TestOpenRejectsInvalidOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		opts  idem.Options
		field string // the error names it
	}{
		{"negative MaxAttempts", idem.Options{MaxAttempts: -1}, "MaxAttempts"},
		{"negative KeyTTL", idem.Options{KeyTTL: -time.Second}, "KeyTTL"},
		{"negative InitialInterval", idem.Options{InitialInterval: -time.Millisecond}, "InitialInterval"},
		{"negative CloseTimeout", idem.Options{CloseTimeout: -1}, "CloseTimeout"},
		{"Multiplier below 1", idem.Options{Multiplier: 0.5}, "Multiplier"},
		{"RandomizationFactor above 1", idem.Options{RandomizationFactor: 1.5}, "RandomizationFactor"},
		{"KeyHeader not a token", idem.Options{KeyHeader: "Idempotency Key"}, "KeyHeader"},
		{"empty SensitiveQueryParams name", idem.Options{SensitiveQueryParams: []string{"token", ""}}, "SensitiveQueryParams"},
		{"Keyring without its Current key", idem.Options{Journal: boltjournal.Options{Encryption: &boltjournal.Keyring{Current: "k2",
			Keys: map[string][]byte{"k1": make([]byte, boltjournal.KeySize)}}}}, "k2"},
		{"Keyring key of the wrong size", idem.Options{Journal: boltjournal.Options{Encryption: &boltjournal.Keyring{Current: "k1",
			Keys: map[string][]byte{"k1": make([]byte, 16)}}}}, "k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := newJournalPath(t)
			c, err := idem.Open(path, &tt.opts)
			require.Nil(t, c)
			require.ErrorIs(t, err, idem.ErrInvalidOptions)
			require.Contains(t, err.Error(), tt.field)
			_, statErr := os.Stat(path)
			require.ErrorIs(t, statErr, fs.ErrNotExist, "invalid options create no file")
		})
	}
}

func TestOpenRejectsWhatIsNotAJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	junk := []byte(strings.Repeat("not a journal\n", 1000))
	require.NoError(t, os.WriteFile(path, junk, 0o600))

	for range 2 { // a failed Open leaves the path free: the second is not journal.ErrLocked
		c, err := idem.Open(path, nil)
		require.Nil(t, c)
		require.ErrorIs(t, err, journal.ErrCorrupt)
		require.Contains(t, err.Error(), path)
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, junk, got, "Open does not write over a file that is not a journal")

	missing := filepath.Join(dir, "no-such-dir", "payments.journal")
	c, err := idem.Open(missing, nil)
	require.Nil(t, c)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Contains(t, err.Error(), missing)
}

// A journal once opened with a Keyring refuses a Client without one (every
// new record would be refused), and the refused Open releases the file.
func TestOpenSealedJournalNeedsItsKeyring(t *testing.T) {
	t.Parallel()
	path := newJournalPath(t)
	keys := &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": make([]byte, boltjournal.KeySize)}}
	c, err := idem.Open(path, &idem.Options{Journal: boltjournal.Options{Encryption: keys}})
	require.NoError(t, err)
	require.NoError(t, c.Close())

	c, err = idem.Open(path, nil)
	require.Nil(t, c)
	require.ErrorIs(t, err, idem.ErrInvalidOptions)
	require.Contains(t, err.Error(), path)

	openClient(t, path, &idem.Options{Journal: boltjournal.Options{Encryption: keys}})
}

// Open prunes finished records older than Retention, and never a pending one.
func TestOpenPrunesFinishedRecords(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	path := newJournalPath(t)
	opts := fastOptions(t)
	opts.KeyTTL, opts.Journal.Retention = time.Millisecond, time.Millisecond // Retention is raised to KeyTTL
	c := openClient(t, path, opts)

	ctx := idem.WithOperationID(context.Background(), "order-1/charge")
	resp, err := c.HTTPClient().Do(p.payment(t, ctx, "order-1"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	p.srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	ctx = idem.WithMaxAttempts(idem.WithOperationID(context.Background(), "order-2/charge"), 1)
	_, err = c.HTTPClient().Do(p.payment(t, ctx, "order-2"))
	var pe *idem.PendingError
	require.ErrorAs(t, err, &pe)
	require.NoError(t, c.Close())

	// Each Open prunes; poll until the settled record is old enough.
	eventually(t, func() bool {
		c, err := idem.Open(path, opts)
		require.NoError(t, err)
		defer c.Close()
		settled, err := c.Journal().Lookup("order-1/charge")
		require.NoError(t, err)
		pending := lookup(t, c, "order-2/charge")
		require.Equal(t, idem.StatePending, pending.State, "pending records are never pruned")
		return settled == nil
	}, "the settled record was not pruned")
}

func TestHTTPClientPostIsJournaledAndSettles(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	c := openClient(t, newJournalPath(t), fastOptions(t))

	hc := c.HTTPClient()
	require.Same(t, hc, c.HTTPClient(), "one client for the Client's life")
	require.Zero(t, hc.Timeout, "calls are bounded by their context, so a timeout leaves them pending")
	require.Equal(t, http.RoundTripper(c.Transport()), hc.Transport)

	ctx := idem.WithOperationID(context.Background(), "order-4827/charge")
	resp, err := hc.Do(p.payment(t, ctx, "order-4827"))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"reference":"order-4827"`)

	seen := p.requests()
	require.Len(t, seen, 1)
	require.Equal(t, http.MethodPost, seen[0].Method)
	require.NotEmpty(t, seen[0].Key)
	require.Equal(t, fmt.Sprintf("attempt=1; max=%d", idem.DefaultMaxAttempts), seen[0].Attempt)

	rec := lookup(t, c, "order-4827/charge")
	require.Equal(t, idem.StateSettled, rec.State)
	require.Equal(t, http.StatusCreated, rec.Status)
	require.Equal(t, seen[0].Key, rec.Key, "the journaled key is the one sent")
	require.False(t, rec.CallerKey)
	require.Equal(t, http.MethodPost, rec.Method)
	require.Equal(t, p.url+"/payments", rec.URL)
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, uint64(1), c.Journal().Stats().WriteAheads)
	require.Equal(t, 1, p.srv.Ledger().Effects["order-4827"])

	// Transport serves another *http.Client just as well, into the same
	// journal; a key the caller sets is the one journaled and sent.
	other := &http.Client{Transport: c.Transport()}
	req := p.payment(t, context.Background(), "order-4828")
	req.Header.Set(idem.DefaultKeyHeader, "caller-key-4828")
	resp, err = other.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "caller-key-4828", p.requests()[1].Key)
	recs, err := c.Journal().Records()
	require.NoError(t, err)
	require.Len(t, recs, 2)
	var found bool
	for _, r := range recs {
		if r.Key == "caller-key-4828" {
			found = true
			require.True(t, r.CallerKey)
			require.Equal(t, idem.StateSettled, r.State)
		}
	}
	require.True(t, found, "caller's key not journaled")
	require.NoError(t, p.srv.Ledger().Check([]string{"order-4827", "order-4828"}))
}

// Every fault the network can throw is retried with the operation's one key;
// the lost response is answered by the server's replay, and the payment
// happens once.
func TestHTTPClientRetriesFaultsWithOneKey(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	c := openClient(t, newJournalPath(t), fastOptions(t))
	p.srv.Script(
		testserver.Fault{Kind: testserver.FaultDropBefore},
		testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable},
		testserver.Fault{Kind: testserver.FaultResetBody},
		testserver.Fault{Kind: testserver.FaultLostResponse}, // the payment is made here
	)

	ctx := idem.WithOperationID(context.Background(), "order-9/charge")
	resp, err := c.HTTPClient().Do(p.payment(t, ctx, "order-9"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))

	seen := p.requests()
	require.Len(t, seen, 5)
	for i, s := range seen {
		require.Equal(t, seen[0].Key, s.Key, "attempt %d", i+1)
		require.Equal(t, fmt.Sprintf("attempt=%d; max=%d", i+1, idem.DefaultMaxAttempts), s.Attempt)
	}
	rec := lookup(t, c, "order-9/charge")
	require.Equal(t, seen[0].Key, rec.Key)
	require.Equal(t, idem.StateSettled, rec.State)
	require.Equal(t, 5, rec.Attempts)

	l := p.srv.Ledger()
	require.Equal(t, 1, l.Effects["order-9"])
	require.Equal(t, 1, l.Replays)
	require.Equal(t, 4, l.Faults["drop"]+l.Faults["503"]+l.Faults["reset"]+l.Faults["lost"])
}

func TestHTTPClientGetIsNotJournaled(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	c := openClient(t, newJournalPath(t), fastOptions(t))

	resp, err := c.HTTPClient().Do(p.payment(t, context.Background(), "order-3"))
	require.NoError(t, err)
	loc := resp.Header.Get("Location")
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NotEmpty(t, loc)
	before := c.Journal().Stats().WriteAheads

	for _, u := range []string{p.url + loc, p.url + "/payments?reference=order-3"} {
		resp, err := c.HTTPClient().Get(u)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Contains(t, string(body), "order-3")
	}

	seen := p.requests()
	require.Len(t, seen, 3)
	for _, s := range seen[1:] {
		require.Equal(t, http.MethodGet, s.Method)
		require.False(t, s.HasKey, "a GET carries no idempotency key")
	}
	// (Commits may still grow: the POST's deferred settle is flushed later.)
	require.Equal(t, before, c.Journal().Stats().WriteAheads, "a GET writes nothing ahead")
	recs, err := c.Journal().Records()
	require.NoError(t, err)
	require.Len(t, recs, 1, "only the POST is journaled")
	require.Equal(t, http.MethodPost, recs[0].Method)
}

// Work left pending by one Client is sent again, with its key and bytes, by
// Resume on the next Client over the same file; the server acted once.
func TestResumeAfterReopenSendsPendingWorkOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// leavePending makes a call that ends pending after the server got
		// the request, and returns its error.
		leavePending func(t *testing.T, p *payments, c *idem.Client, req *http.Request) error
	}{
		{"response lost after processing", func(t *testing.T, p *payments, c *idem.Client, req *http.Request) error {
			p.srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
			_, err := c.HTTPClient().Do(req.WithContext(idem.WithMaxAttempts(req.Context(), 1)))
			require.Equal(t, 1, p.srv.Ledger().Effects["order-42"], "the server acted")
			return err
		}},
		{"caller's context ends while the server works", func(t *testing.T, p *payments, c *idem.Client, req *http.Request) error {
			p.srv.Script(testserver.Fault{Kind: testserver.FaultHold, Delay: time.Hour})
			ctx, cancel := context.WithCancel(req.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := c.HTTPClient().Do(req.WithContext(ctx))
				errc <- err
			}()
			p.waitArrival(t)
			cancel()
			err := <-errc
			require.ErrorIs(t, err, context.Canceled)
			// The server finishes the payment after the caller left.
			eventually(t, func() bool {
				p.srv.ReleaseHolds()
				return p.srv.Ledger().Effects["order-42"] == 1
			}, "the held payment was not made")
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPayments(t)
			path := newJournalPath(t)
			opts := fastOptions(t)
			c, err := idem.Open(path, opts)
			require.NoError(t, err)

			ctx := idem.WithOperationID(context.Background(), "order-42/charge")
			err = tt.leavePending(t, p, c, p.payment(t, ctx, "order-42"))
			var pe *idem.PendingError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "order-42/charge", pe.OperationID)
			first := p.requests()
			require.Len(t, first, 1)
			require.Equal(t, first[0].Key, pe.Key)
			require.NoError(t, c.Close())

			// The next process lifetime.
			c = openClient(t, path, opts)
			rec := lookup(t, c, "order-42/charge")
			require.Equal(t, idem.StatePending, rec.State)
			require.Equal(t, pe.Key, rec.Key)
			require.Equal(t, paymentBody("order-42"), string(rec.Body), "the exact bytes are journaled")
			waitDue(t, rec.NextAttempt)

			outs := resumeAll(t, c)
			require.Len(t, outs, 1)
			out := outs[0]
			require.NoError(t, out.Err)
			require.Equal(t, http.StatusCreated, out.Response.StatusCode)
			require.Equal(t, "true", out.Response.Header.Get("Idempotent-Replayed"))
			require.Equal(t, pe.Key, out.Record.Key)
			require.Equal(t, "order-42/charge", out.Record.OperationID)
			require.Equal(t, idem.StateSettled, out.Record.State)

			seen := p.requests()
			require.Len(t, seen, 2)
			require.Equal(t, pe.Key, seen[1].Key, "resumed with the same key")
			l := p.srv.Ledger()
			require.Equal(t, map[string]int{"order-42": 1}, l.Effects)
			require.Equal(t, 1, l.Replays)

			require.Equal(t, idem.StateSettled, lookup(t, c, "order-42/charge").State)
			require.Empty(t, resumeAll(t, c), "nothing left to resume")
		})
	}
}

// The background resumer finishes what a call left pending, without a
// restart; stop and Close may each be called more than once.
func TestStartResumerFinishesPendingWork(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	path := newJournalPath(t)
	opts := fastOptions(t)
	c, err := idem.Open(path, opts)
	require.NoError(t, err)

	p.srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	ctx := idem.WithMaxAttempts(idem.WithOperationID(context.Background(), "order-7/charge"), 1)
	_, err = c.HTTPClient().Do(p.payment(t, ctx, "order-7"))
	var pe *idem.PendingError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, http.StatusServiceUnavailable, pe.LastStatus)

	outs := make(chan idem.Outcome, 8)
	stop := c.StartResumer(context.Background(), func(o idem.Outcome) {
		if o.Response != nil {
			o.Response.Body.Close()
		}
		outs <- o
	})
	var out idem.Outcome
	select {
	case out = <-outs:
	case <-time.After(10 * time.Second):
		t.Fatal("the resumer reported nothing within 10s")
	}
	require.NoError(t, out.Err)
	require.Equal(t, http.StatusCreated, out.Response.StatusCode)
	require.Equal(t, pe.Key, out.Record.Key)

	seen := p.requests()
	require.Len(t, seen, 2)
	require.Equal(t, pe.Key, seen[1].Key)
	require.Equal(t, map[string]int{"order-7": 1}, p.srv.Ledger().Effects)

	stop()
	stop()
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "a second Close returns the first one's error")
	stop()
	require.Empty(t, outs, "one outcome for one operation")

	// Close wrote the settle down: the next Client finds nothing to do.
	c = openClient(t, path, opts)
	require.Equal(t, idem.StateSettled, lookup(t, c, "order-7/charge").State)
	require.Empty(t, resumeAll(t, c))
	require.Len(t, p.requests(), 2)
}

// Close stops a resumer whose send the server holds: it waits CloseTimeout,
// cancels the attempt, and returns; the operation stays pending for the next
// Open, and the resumer reports nothing after Close returned.
func TestCloseStopsResumerWithinCloseTimeout(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	path := newJournalPath(t)
	opts := fastOptions(t)
	opts.CloseTimeout = 50 * time.Millisecond
	c, err := idem.Open(path, opts)
	require.NoError(t, err)

	p.srv.Script(
		testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable},
		testserver.Fault{Kind: testserver.FaultHold, Delay: time.Hour}, // the resumer's attempt
	)
	ctx := idem.WithMaxAttempts(idem.WithOperationID(context.Background(), "order-8/charge"), 1)
	_, err = c.HTTPClient().Do(p.payment(t, ctx, "order-8"))
	var pe *idem.PendingError
	require.ErrorAs(t, err, &pe)
	p.waitArrival(t)

	var closed, late atomic.Bool
	c.StartResumer(context.Background(), func(o idem.Outcome) {
		if o.Response != nil {
			o.Response.Body.Close()
		}
		if closed.Load() {
			late.Store(true)
		}
	})
	held := p.waitArrival(t)
	require.Equal(t, pe.Key, held.Key)

	start := time.Now()
	require.NoError(t, c.Close())
	closed.Store(true)
	took := time.Since(start)
	require.GreaterOrEqual(t, took, opts.CloseTimeout, "Close gives the send CloseTimeout to finish")
	require.Less(t, took, idem.DefaultCloseTimeout, "then cancels it")

	c = openClient(t, path, opts)
	rec := lookup(t, c, "order-8/charge")
	require.Equal(t, idem.StatePending, rec.State, "a canceled send stays pending")
	require.Equal(t, pe.Key, rec.Key)
	require.Zero(t, p.srv.Ledger().Effects["order-8"], "the held payment was never made")
	require.False(t, late.Load(), "the resumer reported after Close returned")
}

// A resumer stops when its context ends; its stop then returns at once.
func TestStartResumerStopsWithItsContext(t *testing.T) {
	t.Parallel()
	c := openClient(t, newJournalPath(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	stop := c.StartResumer(ctx, nil)
	cancel()
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return after the resumer's context ended")
	}
	require.NoError(t, c.Close())
}

// Per-call options on Resume's and StartResumer's ctx are checked before
// anything is sent.
func TestResumeRejectsInvalidCallOptions(t *testing.T) {
	t.Parallel()
	c := openClient(t, newJournalPath(t), nil)
	bad := idem.WithMaxAttempts(context.Background(), 0)
	require.ErrorIs(t, c.Resume(bad, nil), idem.ErrInvalidRequest)
	require.Panics(t, func() { c.StartResumer(bad, nil) }, "documented: like time.NewTicker")
	require.NoError(t, c.Close(), "the refused resumer holds nothing")
}

// After Close, the Client sends nothing: a journaled call fails with
// journal.ErrClosed before anything is sent, Resume cannot read the journal,
// and StartResumer starts nothing.
func TestClosedClientSendsNothing(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	c, err := idem.Open(newJournalPath(t), fastOptions(t))
	require.NoError(t, err)
	require.NoError(t, c.Close())

	resp, err := c.HTTPClient().Do(p.payment(t, context.Background(), "order-1"))
	require.Nil(t, resp)
	require.ErrorIs(t, err, journal.ErrClosed)

	err = c.Resume(context.Background(), func(idem.Outcome) { t.Error("Resume reported an outcome after Close") })
	require.ErrorIs(t, err, journal.ErrClosed)

	stop := c.StartResumer(context.Background(), func(idem.Outcome) {
		t.Error("a resumer started after Close reported an outcome")
	})
	stop()
	require.Empty(t, p.requests(), "nothing reached the server")
	require.NoError(t, c.Close())
}

// Close does not wait for calls in flight through HTTPClient: their
// operations stay pending in the file, and the next Client resumes them.
func TestCloseLeavesCallsInFlightPending(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	path := newJournalPath(t)
	opts := fastOptions(t)
	c, err := idem.Open(path, opts)
	require.NoError(t, err)

	p.srv.Script(testserver.Fault{Kind: testserver.FaultHold, Delay: time.Hour})
	ctx := idem.WithOperationID(context.Background(), "order-5/charge")
	type result struct {
		resp *http.Response
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := c.HTTPClient().Do(p.payment(t, ctx, "order-5"))
		res <- result{resp, err}
	}()
	p.waitArrival(t)
	require.NoError(t, c.Close())

	// The server finishes; the call's settle finds the journal closed.
	var r result
	eventually(t, func() bool {
		p.srv.ReleaseHolds()
		select {
		case r = <-res:
			return true
		default:
			return false
		}
	}, "the call did not return")
	// The response is final, so the caller gets it; only the settle is lost,
	// which costs one replay with the same key.
	require.NoError(t, r.err)
	r.resp.Body.Close()
	require.Equal(t, http.StatusCreated, r.resp.StatusCode)

	c = openClient(t, path, opts)
	rec := lookup(t, c, "order-5/charge")
	require.Equal(t, idem.StatePending, rec.State)
	waitDue(t, rec.NextAttempt)
	outs := resumeAll(t, c)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	require.Equal(t, rec.Key, outs[0].Record.Key)
	require.Equal(t, map[string]int{"order-5": 1}, p.srv.Ledger().Effects)
}

// A Transport over a Store of one's own (memjournal here, PostgreSQL in a
// fleet) runs a background resumer too: it finishes what a call left
// pending, and stops with stop.
func TestTransportStartResumer(t *testing.T) {
	t.Parallel()
	p := newPayments(t)
	store := memjournal.New(nil)
	t.Cleanup(func() { store.Close() })
	tr, err := idem.NewTransport(store, fastOptions(t))
	require.NoError(t, err)
	p.srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	ctx := idem.WithMaxAttempts(idem.WithOperationID(context.Background(), "order-9/charge"), 1)
	_, err = (&http.Client{Transport: tr}).Do(p.payment(t, ctx, "order-9"))
	var pe *idem.PendingError
	require.ErrorAs(t, err, &pe)

	outs := make(chan idem.Outcome, 8)
	stop := tr.StartResumer(context.Background(), func(o idem.Outcome) {
		if o.Response != nil {
			o.Response.Body.Close()
		}
		outs <- o
	})
	select {
	case out := <-outs:
		require.NoError(t, out.Err)
		require.Equal(t, http.StatusCreated, out.Response.StatusCode)
		require.Equal(t, pe.Key, out.Record.Key)
	case <-time.After(10 * time.Second):
		t.Fatal("the resumer reported nothing within 10s")
	}
	stop()
	stop()
	require.Equal(t, map[string]int{"order-9": 1}, p.srv.Ledger().Effects)
	require.Empty(t, outs, "one outcome for one operation")
}

// seenRequest is what the payments server got: the request line and the
// headers idem sets on every attempt.
type seenRequest struct {
	Method, Path string
	Key          string // the Idempotency-Key header; "" if absent
	HasKey       bool
	Attempt      string // the idem.AttemptHeader
}

// payments is a testserver.Server behind a front that records every request
// it is handed, faults included, so a test can check the headers the server
// saw. Faults, keys and the ledger are the testserver's own.
type payments struct {
	srv *testserver.Server
	url string // the front's base URL; send here, not to srv.URL

	mu      sync.Mutex
	seen    []seenRequest
	arrived chan seenRequest // every request, as it arrives (dropped when full)
}

func newPayments(t *testing.T) *payments {
	t.Helper()
	p := &payments{srv: testserver.NewServer(&testserver.Options{RequireKey: true}),
		arrived: make(chan seenRequest, 64)}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := r.Header[idem.DefaultKeyHeader]
		s := seenRequest{Method: r.Method, Path: r.URL.Path, HasKey: ok,
			Attempt: r.Header.Get(idem.AttemptHeader)}
		if ok {
			s.Key = strings.Join(key, ",")
		}
		p.mu.Lock()
		p.seen = append(p.seen, s)
		p.mu.Unlock()
		select {
		case p.arrived <- s:
		default:
		}
		p.srv.Handler().ServeHTTP(w, r) // w unwrapped: faults hijack it
	}))
	p.url = front.URL
	// Cleanups run last-in first-out: the testserver's Close wakes held
	// requests first, so the front's Close does not wait for them.
	t.Cleanup(front.Close)
	t.Cleanup(p.srv.Close)
	return p
}

// requests returns what the server got so far, in arrival order.
func (p *payments) requests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

// waitArrival waits for the next request to reach the server.
func (p *payments) waitArrival(t *testing.T) seenRequest {
	t.Helper()
	select {
	case s := <-p.arrived:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the server within 10s")
		return seenRequest{}
	}
}

// payment builds a POST /payments request for ref.
func (p *payments) payment(t *testing.T, ctx context.Context, ref string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/payments",
		strings.NewReader(paymentBody(ref)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// paymentBody is the JSON body of payment's request for ref.
func paymentBody(ref string) string {
	return fmt.Sprintf(`{"amount":1250,"currency":"eur","reference":%q}`, ref)
}

// fastOptions gives millisecond backoff, and a base transport without
// keep-alives, so that net/http never re-sends a request on its own on a
// reused connection and every attempt the server sees is one idem made.
func fastOptions(t *testing.T) *idem.Options {
	base := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(base.CloseIdleConnections)
	return &idem.Options{Base: base, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond}
}

// openClient opens a Client on path, closed at the end of the test.
func openClient(t *testing.T, path string, opts *idem.Options) *idem.Client {
	t.Helper()
	c, err := idem.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newJournalPath returns a journal path in a fresh temporary directory.
func newJournalPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "payments.journal")
}

// lookup returns the record of operation id, failing the test if it has none.
func lookup(t *testing.T, c *idem.Client, id string) *idem.Record {
	t.Helper()
	rec, err := c.Journal().Lookup(id)
	require.NoError(t, err)
	require.NotNil(t, rec, "no record for operation %q", id)
	return rec
}

// waitDue waits (real time, a few milliseconds with fastOptions) until a
// pending operation's next attempt is due, so Resume sends it.
func waitDue(t *testing.T, at time.Time) {
	t.Helper()
	d := time.Until(at)
	require.Less(t, d, time.Second, "next attempt unexpectedly far away")
	time.Sleep(d)
}

// eventually polls cond every few milliseconds for up to 10 s (real time).
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("not within 10s: " + msg)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// resumeAll runs Resume with a bounded context and returns its outcomes,
// response bodies read and closed.
func resumeAll(t *testing.T, c *idem.Client) []idem.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var outs []idem.Outcome
	err := c.Resume(ctx, func(o idem.Outcome) {
		if o.Response != nil {
			_, _ = io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
		}
		outs = append(outs, o)
	})
	require.NoError(t, err)
	return outs
}
