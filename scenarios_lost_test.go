package idem

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// S09: the server commits the payment, then drops the connection before the
// response. With a key the retry gets the stored result; without journaling
// the caller learns the outcome is unknown, and nothing is sent twice.
func TestS09_LostResponse(t *testing.T) {
	t.Run("journaled", func(t *testing.T) {
		srv := startPayments(t, &testserver.Options{RequireKey: true})
		srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
		j, _ := testJournal(t)
		tr, _ := transportOn(t, j, Options{}, nil, time.Time{})

		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-9", 900)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), "the retry must get the stored result")

		l := srv.Ledger()
		require.Equal(t, 2, l.Requests)
		require.Equal(t, 1, l.Replays)
		require.Equal(t, map[string]int{"order-9": 1}, l.Effects)
		require.Equal(t, StateSettled, onlyRecord(t, tr).State)
	})
	t.Run("unjournaled", func(t *testing.T) {
		srv := startPayments(t, nil)
		srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
		tr, _ := transportOn(t, nil, Options{Methods: []string{}}, nil, time.Time{})

		req, body := paymentRequest(t, context.Background(), srv.URL, "order-10", 900)
		resp, err := tr.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrOutcomeUnknown)
		require.Equal(t, int32(1), body.closes.Load())

		l := srv.Ledger()
		require.Equal(t, 1, l.Requests, "an unkeyed POST whose outcome is unknown must not be re-sent")
		require.Equal(t, map[string]int{"order-10": 1}, l.Effects)
	})
}
