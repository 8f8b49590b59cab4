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
	// On startup: finish what a crashed run left pending.
	if err := c.Resume(context.Background(), nil); err != nil {
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
