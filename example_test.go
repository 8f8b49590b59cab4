package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idem-go/idem"
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
