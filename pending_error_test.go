// Tests for PendingError's message.

package idem

import (
	"errors"
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
