// Checked examples of idem's public API (package idem_test): a journaled
// client, operation IDs, PendingError, the background resumer, per-call
// options, ResponseInfo, the test server, encryption at rest, reconciling.

package idem_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
)

// journalPath returns a journal path in a fresh temporary directory.
func journalPath() (string, func()) {
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	return filepath.Join(dir, "payments.journal"), func() { os.RemoveAll(dir) }
}

// Replace http.DefaultClient with idem's client, resume what the last run left
// pending, and send a payment.
func Example() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	path, cleanup := journalPath()
	defer cleanup()

	c, err := idem.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// On startup: finish what a crashed run left pending, for 30 s at most
	// (with the server down, the rest stays pending for later).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Resume(ctx, nil); err != nil {
		log.Fatal(err)
	}
	http.DefaultClient = c.HTTPClient() // the one-line drop-in

	resp, err := http.Post(srv.URL+"/payments", "application/json",
		strings.NewReader(`{"amount":1250,"currency":"eur","reference":"order-4827"}`))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	fmt.Println("payments for order-4827:", srv.Ledger().Effects["order-4827"])
	// Output:
	// 201 Created
	// payments for order-4827: 1
}

// An operation ID binds a business operation to one idempotency key, across
// calls and restarts: the second call gets the server's stored response.
func ExampleWithOperationID() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := idem.WithOperationID(context.Background(), "order-4827/charge")
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
			strings.NewReader(`{"amount":1250,"currency":"eur","reference":"order-4827"}`))
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("payments:", srv.Ledger().Payments())
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// payments: 1
}

// When the outcome is still unknown after the last attempt, the operation
// stays pending in the journal and the call returns a *PendingError. Resume
// sends it again later with the same key.
func ExamplePendingError() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable},
		testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 2, InitialInterval: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_, err = c.HTTPClient().Post(srv.URL+"/payments", "application/json",
		strings.NewReader(`{"amount":990,"currency":"eur","reference":"order-77"}`))
	var pe *idem.PendingError
	if errors.As(err, &pe) {
		fmt.Println("pending after", pe.Attempts, "attempts, last status", pe.LastStatus)
	}

	// Later, once its next-attempt time has come, Resume finishes it with
	// the same key.
	time.Sleep(time.Until(pe.NextAttempt))
	c.Resume(context.Background(), func(o idem.Outcome) {
		if o.Err != nil {
			fmt.Println("still not done:", o.Err)
			return
		}
		o.Response.Body.Close()
		fmt.Println("resumed:", o.Response.StatusCode, "same key:", o.Record.Key == pe.Key)
	})
	fmt.Println("payments:", srv.Ledger().Payments())
	// Output:
	// pending after 2 attempts, last status 503
	// resumed: 201 same key: true
	// payments: 1
}

// A long-running service starts a background resumer once: operations that
// calls leave pending are sent again as soon as they are due, without
// waiting for a restart.
func ExampleClient_StartResumer() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1, InitialInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // stops the resumer too, waiting up to CloseTimeout

	resumed := make(chan string, 1)
	stop := c.StartResumer(context.Background(), func(o idem.Outcome) {
		if o.Err != nil {
			resumed <- fmt.Sprint("still not done: ", o.Err)
			return
		}
		o.Response.Body.Close()
		resumed <- fmt.Sprint(o.Record.OperationID, " settled with ", o.Response.StatusCode)
	})
	defer stop()

	ctx := idem.WithOperationID(context.Background(), "order-5/charge")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
		strings.NewReader(`{"amount":500,"currency":"eur","reference":"order-5"}`))
	_, err = c.HTTPClient().Do(req)
	var pe *idem.PendingError
	fmt.Println("call left it pending:", errors.As(err, &pe))
	fmt.Println(<-resumed)
	fmt.Println("payments:", srv.Ledger().Payments())
	// Output:
	// call left it pending: true
	// order-5/charge settled with 201
	// payments: 1
}

// Per-call options travel in the request's context: fewer attempts for this
// call, and a limit on each attempt apart from the call's own deadline.
func ExampleWithMaxAttempts() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable},
		testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable})
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, &idem.Options{InitialInterval: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the whole call
	defer cancel()
	ctx = idem.WithMaxAttempts(ctx, 2)                // instead of Options.MaxAttempts
	ctx = idem.WithAttemptTimeout(ctx, 2*time.Second) // each attempt, until response headers
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
		strings.NewReader(`{"amount":300,"currency":"eur","reference":"order-6"}`))
	_, err = c.HTTPClient().Do(req)
	var pe *idem.PendingError
	if errors.As(err, &pe) {
		fmt.Println("pending after", pe.Attempts, "attempts")
	}

	_, err = c.HTTPClient().Do(req.WithContext(idem.WithMaxAttempts(ctx, 0)))
	fmt.Println(errors.Is(err, idem.ErrInvalidRequest))
	// Output:
	// pending after 2 attempts
	// true
}

// WithoutJournal keeps a call off the disk (say, its body holds data that must
// not be stored). It is still retried within the call, with one idempotency
// key kept in memory; if the process dies, nothing resumes it.
func ExampleWithoutJournal() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse}) // paid, then the connection drops
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, &idem.Options{InitialInterval: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := idem.WithoutJournal(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
		strings.NewReader(`{"amount":800,"currency":"eur","reference":"order-8"}`))
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	recs, _ := c.Journal().Records()
	fmt.Println(resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed"))
	fmt.Println("journaled:", len(recs), "payments:", srv.Ledger().Payments())
	// Output:
	// 201 replayed: true
	// journaled: 0 payments: 1
}

// ResponseInfo tells the caller which idempotency key and operation a
// response answers, for its own logs or for a support ticket with the
// server's operator, as stripe-go's LastResponse.IdempotencyKey does.
func ExampleResponseInfo() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := idem.WithOperationID(context.Background(), "order-4827/charge")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
		strings.NewReader(`{"amount":1250,"currency":"eur","reference":"order-4827"}`))
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	info, _ := idem.ResponseInfo(resp)
	rec, _ := c.Journal().Lookup("order-4827/charge")
	fmt.Println(resp.StatusCode, info.OperationID, "journaled:", info.Journaled)
	fmt.Println("key as journaled:", info.Key == rec.Key)

	// A GET is retried, not journaled, and sent without a key.
	resp, err = c.HTTPClient().Get(srv.URL + "/_ledger")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	info, ok := idem.ResponseInfo(resp)
	fmt.Printf("%d from idem: %v, journaled: %v, key: %q\n", resp.StatusCode, ok, info.Journaled, info.Key)
	// Output:
	// 201 order-4827/charge journaled: true
	// key as journaled: true
	// 200 from idem: true, journaled: false, key: ""
}

// testserver is for your own tests too: script the faults you fear, send
// through idem, and let the server's ledger prove exactly-once.
func Example_testServerInYourTests() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	srv.Script(
		testserver.Fault{Kind: testserver.FaultDropBefore},   // connection closed before processing
		testserver.Fault{Kind: testserver.FaultLostResponse}, // processed, response lost
	)
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, &idem.Options{InitialInterval: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// In a real test: call the code under test, configured with c.HTTPClient().
	resp, err := c.HTTPClient().Post(srv.URL+"/payments", "application/json",
		strings.NewReader(`{"amount":1250,"currency":"eur","reference":"order-4827"}`))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()

	ledger := srv.Ledger()
	fmt.Println("requests:", ledger.Requests, "replays:", ledger.Replays)
	fmt.Println("exactly once:", ledger.Check([]string{"order-4827"}) == nil)
	// Output:
	// requests: 3 replays: 1
	// exactly once: true
}

// Seal what the journal keeps of each request with AES-256-GCM, then rotate
// the key: records written under the old key still read, new ones use the
// new key. An API token in the query is kept out of the file altogether and
// put back by PrepareResume.
func ExampleKeyring() {
	srv := testserver.NewServer(nil)
	defer srv.Close()
	path, cleanup := journalPath()
	defer cleanup()
	newKey := func() []byte {
		k := make([]byte, boltjournal.KeySize) // in production: from your secret store
		rand.Read(k)
		return k
	}
	opts := &idem.Options{
		SensitiveQueryParams: []string{"api_key"},
		PrepareResume: func(r *http.Request) error {
			r.URL.RawQuery += "&api_key=ak_123" // the journal never kept it
			return nil
		},
		Journal: boltjournal.Options{Encryption: &boltjournal.Keyring{Current: "2026-03", Keys: map[string][]byte{"2026-03": newKey()}}},
	}
	pay := func(c *idem.Client, op string) {
		ctx := idem.WithOperationID(context.Background(), op)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments?v=2&api_key=ak_123",
			strings.NewReader(`{"amount":1250,"currency":"eur","reference":"`+op+`","card":"4111111111111111"}`))
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}

	c, err := idem.Open(path, opts)
	if err != nil {
		log.Fatal(err)
	}
	pay(c, "order-1")
	c.Close()

	// Rotation: a new Current key; the old one stays to read older records.
	opts.Journal.Encryption.Keys["2026-04"] = newKey()
	opts.Journal.Encryption.Current = "2026-04"
	c, err = idem.Open(path, opts)
	if err != nil {
		log.Fatal(err)
	}
	pay(c, "order-2")
	for _, op := range []string{"order-1", "order-2"} {
		rec, err := c.Journal().Lookup(op)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(op, rec.State, "key", rec.EncryptionKeyID, rec.URL[len(srv.URL):])
	}
	c.Close()

	raw, _ := os.ReadFile(path)
	fmt.Println("card number in the file:", bytes.Contains(raw, []byte("4111111111111111")))
	fmt.Println("API key in the file:", bytes.Contains(raw, []byte("ak_123")))
	// Output:
	// order-1 settled key 2026-03 /payments?v=2
	// order-2 settled key 2026-04 /payments?v=2
	// card number in the file: false
	// API key in the file: false
}

// An operation left pending for longer than KeyTTL is never re-sent: the
// server may have forgotten its key, so a resend could pay twice. Resume
// reports it with ErrKeyExpired, and its Record carries what reconciling
// needs: operation ID, key, method, URL, headers and body, Created (the
// write-ahead, just before the first attempt) and LastAttempt. Look the
// payment up by its business reference; send a new operation only if the
// server has none.
//
// Here a KeyTTL of 50 ms stands in for the usual 24 hours. The first payment
// went through but its response was lost; the second was cut off before the
// server processed it.
func ExampleClient_Resume_reconcileExpired() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse}, // paid, answer lost
		testserver.Fault{Kind: testserver.FaultDropBefore}) // not paid
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, &idem.Options{KeyTTL: 50 * time.Millisecond, MaxAttempts: 1,
		InitialInterval: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	pay := func(opID, ref string) error {
		ctx := idem.WithOperationID(context.Background(), opID)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
			strings.NewReader(`{"amount":1250,"currency":"eur","reference":"`+ref+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	for _, ref := range []string{"order-1", "order-2"} {
		var pe *idem.PendingError
		fmt.Println(ref, "pending:", errors.As(pay(ref+"/charge", ref), &pe))
	}

	time.Sleep(100 * time.Millisecond) // ... and the process is down for longer than KeyTTL

	var expired []*idem.Record
	err = c.Resume(context.Background(), func(o idem.Outcome) {
		switch {
		case errors.Is(o.Err, idem.ErrKeyExpired):
			expired = append(expired, o.Record) // reconcile after Resume, one at a time
		case o.Response != nil:
			o.Response.Body.Close()
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	slices.SortFunc(expired, func(a, b *idem.Record) int { return strings.Compare(a.OperationID, b.OperationID) })

	for _, rec := range expired {
		// The journaled body names the business reference.
		var body struct{ Reference string }
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s expired: %s %s after %d attempt(s)\n", rec.OperationID,
			rec.Method, strings.TrimPrefix(rec.URL, srv.URL), rec.Attempts)
		// When: Created stands for the first attempt, made right after it.
		fmt.Println("  first and last attempt known:", !rec.Created.IsZero() && !rec.LastAttempt.Before(rec.Created))

		// GET is not journaled: a lookup is safe to retry.
		resp, err := c.HTTPClient().Get(srv.URL + "/payments?reference=" + url.QueryEscape(body.Reference))
		if err != nil {
			log.Fatal(err)
		}
		var found struct{ Data []struct{ ID string } }
		err = json.NewDecoder(resp.Body).Decode(&found)
		resp.Body.Close()
		if err != nil {
			log.Fatal(err)
		}
		if len(found.Data) > 0 {
			fmt.Println("  paid already: nothing to do")
			continue
		}
		// Not paid: a new operation, with a new operation ID (the old one
		// stays expired) and so a new key.
		if err := pay(rec.OperationID+"#2", body.Reference); err != nil {
			log.Fatal(err)
		}
		fmt.Println("  not paid: charged again")
	}

	ledger := srv.Ledger()
	fmt.Println("payments:", ledger.Effects["order-1"], ledger.Effects["order-2"])
	fmt.Println("exactly once:", ledger.Check([]string{"order-1", "order-2"}) == nil)
	// Output:
	// order-1 pending: true
	// order-2 pending: true
	// order-1/charge expired: POST /payments after 1 attempt(s)
	//   first and last attempt known: true
	//   paid already: nothing to do
	// order-2/charge expired: POST /payments after 1 attempt(s)
	//   first and last attempt known: true
	//   not paid: charged again
	// payments: 1 1
	// exactly once: true
}

// Against a provider that ignores idempotency keys, a Reconciler looks a payment up by its
// reference before idem sends it again. Here the first attempt's answer is lost after the
// charge: the look-up finds the payment, and nothing is charged twice.
func ExampleOptions_reconcile() {
	srv := testserver.NewServer(&testserver.Options{IgnoreKeys: true}) // every POST charges
	defer srv.Close()
	srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse}) // charged, answer lost
	lookups := &http.Client{Timeout: 2 * time.Second}
	reconcile := func(ctx context.Context, rec *idem.Record, _ bool) (idem.Reconciliation, error) {
		var p struct{ Reference string }
		if err := json.Unmarshal(rec.Body, &p); err != nil {
			return idem.Reconciliation{}, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/payments?reference="+url.QueryEscape(p.Reference), nil)
		resp, err := lookups.Do(req)
		if err != nil {
			return idem.Reconciliation{}, err // cannot tell: stays pending
		}
		defer resp.Body.Close()
		var found struct{ Data []json.RawMessage }
		if err := json.NewDecoder(resp.Body).Decode(&found); err != nil {
			return idem.Reconciliation{}, err
		}
		if len(found.Data) == 0 {
			return idem.Reconciliation{Send: true}, nil // never charged: send it again
		}
		return idem.Reconciliation{Response: &http.Response{StatusCode: http.StatusOK, Header: http.Header{},
			Body: io.NopCloser(bytes.NewReader(found.Data[0]))}}, nil // charged: settle with it
	}
	path, cleanup := journalPath()
	defer cleanup()
	c, err := idem.Open(path, &idem.Options{Reconcile: reconcile, InitialInterval: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	resp, err := c.HTTPClient().Post(srv.URL+"/payments", "application/json",
		strings.NewReader(`{"amount":1250,"currency":"eur","reference":"order-7"}`))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("status:", resp.StatusCode)
	fmt.Println("charged:", srv.Ledger().Effects["order-7"])
	// Output:
	// status: 200
	// charged: 1
}
