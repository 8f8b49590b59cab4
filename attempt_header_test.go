// Tests for the attempt header (AttemptHeader, "Idem-Attempt: attempt=N;
// max=M"): on every attempt, never in the journal or the fingerprint, and off
// with Options.DisableAttemptHeader.

package idem

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAttemptHeaderCountsAttemptsWithoutChangingTheOperation(t *testing.T) {
	t.Parallel()
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 4}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n < 3 {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	ctx := WithOperationID(context.Background(), "order-9/charge")
	req := newRequest(t, http.MethodPost, srv.URL, `{"amount":5}`)
	req.Header.Set(AttemptHeader, "attempt=99; max=99") // the caller's is replaced
	resp, err := tr.RoundTrip(req.WithContext(ctx))
	require.NoError(t, err)
	drain(t, resp)

	reqs := srv.requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		require.Equal(t, []string{[]string{"attempt=1; max=4", "attempt=2; max=4", "attempt=3; max=4"}[i]},
			r.Header.Values(AttemptHeader))
		sameBytes(t, reqs[0].Body, r.Body, "attempt %d", i+1)
	}
	sameKey(t, reqs)

	// Not journaled, so not part of the fingerprint: calling again with the
	// same operation ID and body is the same operation, not ErrKeyReuse.
	rec := onlyRecord(t, tr)
	require.Empty(t, rec.Header.Values(AttemptHeader))
	resp, err = tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"amount":5}`).WithContext(ctx))
	require.NoError(t, err)
	drain(t, resp)
	sameKey(t, srv.requests())

	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(AttemptHeader)), "the attempt header is never journaled")
	require.False(t, bytes.Contains(raw, []byte("attempt=")))
}

func TestAttemptHeaderOnResumeAndUnjournaled(t *testing.T) {
	tr, clk, srv := memScenario(t, &Options{MaxAttempts: 2}, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			reply(w, http.StatusBadGateway)
			return
		}
		reply(w, http.StatusOK)
	})
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	pe := pendingErr(t, err)
	clk.Advance(pe.NextAttempt.Sub(clk.Now()))
	require.NoError(t, tr.Resume(context.Background(), nil))
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	drain(t, resp)

	var got []string
	for _, r := range srv.requests() {
		got = append(got, r.Header.Get(AttemptHeader))
	}
	// Two attempts in the call, one in Resume (it counts from 1 again), one GET.
	require.Equal(t, []string{"attempt=1; max=2", "attempt=2; max=2", "attempt=1; max=2", "attempt=1; max=2"}, got)
}

func TestDisableAttemptHeader(t *testing.T) {
	tr, _, srv := memScenario(t, &Options{DisableAttemptHeader: true}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusCreated)
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	require.NoError(t, err)
	drain(t, resp)
	require.Empty(t, srv.requests()[0].Header.Values(AttemptHeader))
}

// The values made once at start are the ones formatted on demand, inside the
// table and beyond it.
func TestAttemptHeaderTable(t *testing.T) {
	for maxN := 0; maxN <= len(attemptHeaders)+2; maxN++ {
		for n := 0; n <= maxN+1; n++ {
			want := "attempt=" + strconv.Itoa(n) + "; max=" + strconv.Itoa(maxN)
			require.Equal(t, want, attemptHeader(n, maxN))
		}
	}
}
