// ledger_test.go tests the exactly-once checks on Ledger, and its counts of the
// idempotency Store's failures.

package testserver

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"

	"github.com/stretchr/testify/require"
)

func TestLedgerCheck(t *testing.T) {
	for _, tc := range []struct {
		name       string
		effects    map[string]int
		refs       []string
		missing    []string
		duplicated []string
	}{
		{name: "exactly once", effects: map[string]int{"a": 1, "b": 1}, refs: []string{"b", "a"}},
		{name: "extra single effect allowed", effects: map[string]int{"a": 1, "x": 1}, refs: []string{"a"}},
		{name: "no refs, no dups", effects: map[string]int{"a": 1}},
		{name: "empty", refs: nil},
		{name: "missing", effects: map[string]int{"a": 1}, refs: []string{"c", "a", "b", "c"}, missing: []string{"b", "c"}},
		{name: "duplicate", effects: map[string]int{"a": 2, "b": 1, "z": 3}, refs: []string{"a", "b"}, duplicated: []string{"a", "z"}},
		{name: "both", effects: map[string]int{"a": 2}, refs: []string{"a", "b"}, missing: []string{"b"}, duplicated: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Ledger{Effects: tc.effects}
			err := l.Check(tc.refs)
			if tc.missing == nil && tc.duplicated == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotExactlyOnce)
			var ce *CheckError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, tc.missing, ce.Missing)
			require.Equal(t, tc.duplicated, ce.Duplicated)
			require.Equal(t, tc.duplicated, l.Duplicates())
		})
	}
}

func TestCheckErrorMessage(t *testing.T) {
	err := &CheckError{Missing: []string{"a", "b", "c", "d", "e", "f", "g"}, Duplicated: []string{"x"}}
	require.Equal(t, "testserver: not exactly once: 7 missing (a b c d e and 2 more), 1 duplicated (x)", err.Error())
}

func TestLedgerSummary(t *testing.T) {
	l := Ledger{Effects: map[string]int{"a": 2, "b": 1}, Requests: 9, Faults: map[string]int{"lost": 2, "drop": 1}}
	sum := l.Summary()
	require.Contains(t, sum, "payments created             3 for 2 references")
	require.Contains(t, sum, "charged twice or more        1 references")
	require.Contains(t, sum, "faults injected              3\n"+
		"      1  connection dropped before charging\n"+
		"      2  charged, then the response was lost\n")
	require.Contains(t, Ledger{}.Summary(), "faults injected              0\n")
	require.Equal(t, "503 Service Unavailable, Retry-After as a date", DescribeFault("503 Retry-After=date"))
	require.Equal(t, 3, l.Payments())
}

// claimFails is a memstore whose Claim fails: the middleware answers 503.
type claimFails struct{ *memstore.Store }

func (claimFails) Claim(context.Context, server.Scope, string, string, time.Duration, time.Duration) (server.Claim, error) {
	return server.Claim{}, errors.New("store down")
}

// The Ledger counts the middleware's 503s for a failed Store, not the injected ones, and
// every Store failure it reports, a completion that failed after the payment included.
func TestLedgerCountsStoreFailures(t *testing.T) {
	down := newTestServer(t, &Options{Store: claimFails{memstore.New(nil)}})
	down.Script(Fault{Kind: FaultStatus, Status: 503})
	require.Equal(t, http.StatusServiceUnavailable, post(t, down, "k1", payBody("r1", 1)).status, "injected")
	a := post(t, down, "k2", payBody("r2", 1))
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, "store-unavailable", problemType(t, a))
	l := down.Ledger()
	require.Equal(t, 1, l.StoreUnavailable)
	require.Equal(t, 1, l.StoreErrors)
	require.Zero(t, l.Payments())

	lost := newTestServer(t, &Options{Store: completeFails{memstore.New(nil)}})
	require.Equal(t, http.StatusCreated, post(t, lost, "k", payBody("r", 1)).status)
	l = lost.Ledger()
	require.Zero(t, l.StoreUnavailable)
	require.Zero(t, l.StoreErrors)
	require.Equal(t, 1, l.StoreCalls["uncertain complete"], "the completion failed: it is repeated in the background")
}
