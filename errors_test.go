// Tests for errors.go: PendingError's message.

package idem

import (
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The message gives the next attempt to the millisecond: a backoff of 350 ms
// cut to the second would read as already past.
func TestPendingErrorMessage(t *testing.T) {
	next := time.Date(2026, 12, 5, 12, 12, 54, 889_000_000, time.FixedZone("CET", 3600))
	err := &PendingError{Key: "k1", OperationID: "order-1/charge", Attempts: 2,
		Err: errors.New("connection refused"), NextAttempt: next}
	require.Equal(t, `idem: operation "order-1/charge" (key k1) pending after 2 attempt(s): connection refused; next attempt not before 2026-12-05T11:12:54.889Z`, err.Error())
	err = &PendingError{Key: "k2", Attempts: 1, LastStatus: 503}
	require.Equal(t, "idem: operation (key k2) pending after 1 attempt(s): last status 503", err.Error())
}

// A call that finds its operation not yet due says what the last attempt
// met, as the call that left it pending did, and sends nothing.
func TestPendingErrorOfCallNotDue(t *testing.T) {
	sent := 0
	refused := roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent++
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	})
	tr, _ := transportOver(t, memStore(t), Options{MaxAttempts: 1}, refused, time.Time{})
	call := func() *PendingError {
		req := newRequest(t, http.MethodPost, "http://127.0.0.1:1/payments", payload)
		_, err := tr.RoundTrip(req.WithContext(WithOperationID(req.Context(), "order-1/charge")))
		return pendingErr(t, err)
	}
	first := call()
	require.Contains(t, first.Error(), "connection refused")
	again := call()
	require.Equal(t, 1, sent, "not due: nothing sent")
	require.Equal(t, first.NextAttempt, again.NextAttempt)
	require.Contains(t, again.Error(), "connection refused", "not %q", again.Error())
}
