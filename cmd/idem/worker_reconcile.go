// This file holds the worker's Reconciler, for a fake server that ignores idempotency keys
// (idem demo -keyless): before idem sends again a payment whose earlier attempt may have
// reached the server, the worker looks it up by its business reference, as a client of
// such a provider must (idem.Options.Reconcile).

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/idem-go/idem"
)

// reconcileByReference returns a Reconciler that asks base's GET /payments?reference=…
// for the reference in a payment's journaled body: a payment found is the outcome; none
// means the payment never happened; no answer means it cannot tell.
func reconcileByReference(base string) idem.Reconciler {
	lookups := &http.Client{Timeout: 2 * time.Second} // a GET: safe to repeat, never journaled
	return func(ctx context.Context, rec *idem.Record, _ bool) (idem.Reconciliation, error) {
		var p struct {
			Reference string `json:"reference"`
		}
		if err := json.Unmarshal(rec.Body, &p); err != nil || p.Reference == "" {
			return idem.Reconciliation{}, fmt.Errorf("no reference in the journaled body: %v", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/payments?reference="+url.QueryEscape(p.Reference), nil)
		if err != nil {
			return idem.Reconciliation{}, err
		}
		resp, err := lookups.Do(req)
		if err != nil {
			return idem.Reconciliation{}, err
		}
		defer resp.Body.Close()
		var list struct {
			Data []json.RawMessage `json:"data"`
		}
		if resp.StatusCode != http.StatusOK {
			return idem.Reconciliation{}, fmt.Errorf("look-up of %s answered %d", p.Reference, resp.StatusCode)
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
			return idem.Reconciliation{}, err
		}
		if len(list.Data) == 0 {
			return idem.Reconciliation{Send: true}, nil
		}
		return idem.Reconciliation{Response: &http.Response{StatusCode: http.StatusOK,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   io.NopCloser(bytes.NewReader(list.Data[0]))}}, nil
	}
}
