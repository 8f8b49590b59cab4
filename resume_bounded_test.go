// Tests that a Resume at startup is bounded by its context, as the README's
// Quickstart tells: with the server down, a deadline or a cancel makes it
// return at once, every operation left pending for later.

package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// downPending leaves n operations pending for a server that is down (nothing
// listens on its address), and moves the clock past their next attempts.
func downPending(t *testing.T, opts *Options, n int) (*Transport, *fakeClock) {
	t.Helper()
	opts.RetryBudget = RetryBudget{Disabled: true} // every operation tries: the worst case
	tr, clk := testTransport(t, opts)
	url := "http://" + freeAddr(t) + "/payments"
	for i := range n {
		ctx := WithMaxAttempts(WithOperationID(context.Background(), fmt.Sprintf("boot-%d", i)), 1)
		req := newRequest(t, http.MethodPost, url, paymentBody(fmt.Sprintf("boot-%d", i), 1))
		_, err := tr.RoundTrip(req.WithContext(ctx))
		pendingErr(t, err)
	}
	clk.Advance(time.Minute)
	return tr, clk
}

// A deadline on Resume's context bounds it: under the default backoff the
// six attempts of each operation would wait about 8 s; with 2 s left, each
// gives up once its next wait would pass the deadline, pending.
func TestResumeBoundedByDeadline(t *testing.T) {
	t.Parallel()
	// One at a time: the fake clock is shared, and waits of concurrent
	// sends would add up on it.
	tr, clk := downPending(t, &Options{ResumeConcurrency: 1}, 4)
	start, began := clk.Now(), time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(2*time.Second))
	defer cancel()
	var outs []Outcome
	require.NoError(t, tr.Resume(ctx, func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 4)
	for _, o := range outs {
		var pe *PendingError
		require.ErrorAs(t, o.Err, &pe, "%s", o.Record.OperationID)
		require.Less(t, pe.Attempts, DefaultMaxAttempts+1, "gave up before its schedule ran out")
	}
	require.Less(t, clk.Now().Sub(start), 2*time.Second, "no wait past the deadline")
	// Waited for real, the four schedules would take tens of seconds; 5 s
	// leaves a busy machine room.
	require.Less(t, time.Since(began), 5*time.Second, "no real waiting")
	require.Equal(t, 4, countState(t, tr.bolt(), StatePending))
}

// A Resume whose context is canceled while it waits to retry returns
// promptly: the operation it was sending stays pending, and those it had not
// started are not touched.
func TestResumeCanceledReturnsPromptly(t *testing.T) {
	t.Parallel()
	tr, clk := downPending(t, &Options{ResumeConcurrency: 1}, 3)
	before, err := listRecords(tr.journal)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	clk.onSleep = func(time.Duration) { cancel() } // the process is told to stop mid-wait
	var outs []Outcome
	require.NoError(t, tr.Resume(ctx, func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 1, "nothing started after the cancel")
	require.ErrorIs(t, outs[0].Err, context.Canceled)
	var pe *PendingError
	require.True(t, errors.As(outs[0].Err, &pe))
	after, err := listRecords(tr.journal)
	require.NoError(t, err)
	require.Len(t, after, 3)
	for i, r := range after {
		require.Equal(t, StatePending, r.State, r.OperationID)
		if r.OperationID != outs[0].Record.OperationID {
			require.Equal(t, before[i].Attempts, r.Attempts, "%s untouched", r.OperationID)
		}
	}
}
