// Checked examples of reconciling: by hand, for operations whose key expired while
// they were pending (ErrKeyExpired), and with Options.Reconcile, against a
// provider that ignores keys.

package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/testserver"
)

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
