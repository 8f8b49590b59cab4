// Tests for the per-call options (context.go): WithMaxAttempts,
// WithAttemptTimeout and WithoutJournal, and their validation before anything
// is written or sent.

package idem

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCallOptionsRefusedBeforeAnythingIsWritten(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(context.Context) context.Context
	}{
		{"max attempts 0", func(c context.Context) context.Context { return WithMaxAttempts(c, 0) }},
		{"max attempts -1", func(c context.Context) context.Context { return WithMaxAttempts(c, -1) }},
		{"attempt timeout 0", func(c context.Context) context.Context { return WithAttemptTimeout(c, 0) }},
		{"attempt timeout -1s", func(c context.Context) context.Context { return WithAttemptTimeout(c, -time.Second) }},
		{"no journal with an operation ID", func(c context.Context) context.Context {
			return WithoutJournal(WithOperationID(c, "order-1/charge"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, srv := memScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) { reply(w, http.StatusCreated) })
			body := &countingBody{Reader: strings.NewReader(`{"a":1}`)}
			req, err := http.NewRequestWithContext(tc.ctx(context.Background()), http.MethodPost, srv.URL, body)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrInvalidRequest)
			require.True(t, strings.HasPrefix(err.Error(), "idem: "), err.Error())
			require.Zero(t, srv.count(), "nothing sent")
			recs, err := listRecords(tr.journal)
			require.NoError(t, err)
			require.Empty(t, recs, "nothing written")
			require.EqualValues(t, 1, body.closes.Load(), "body closed exactly once")
		})
	}
}

func TestWithMaxAttemptsOverridesOptions(t *testing.T) {
	tr, clk, srv := memScenario(t, &Options{MaxAttempts: 6}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	req := newRequest(t, http.MethodPost, srv.URL, `{"a":1}`)
	req = req.WithContext(WithMaxAttempts(req.Context(), 2))
	_, err := tr.RoundTrip(req)
	pe := pendingErr(t, err)
	require.Equal(t, 2, pe.Attempts)
	require.Equal(t, 2, srv.count())
	require.Len(t, clk.Sleeps(), 1, "no sleep after the last attempt")

	// Unjournaled requests too: the last response, after 1 attempt.
	req = newRequest(t, http.MethodGet, srv.URL, "")
	resp, err := tr.RoundTrip(req.WithContext(WithMaxAttempts(req.Context(), 1)))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, 3, srv.count())
}

// WithAttemptTimeout cuts a slow attempt short and retries while the caller's
// own deadline still has time.
func TestWithAttemptTimeoutIsPerAttempt(t *testing.T) {
	t.Parallel()
	tr, _, srv := memScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select { // slower than the attempt timeout
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		reply(w, http.StatusCreated)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := newRequest(t, http.MethodPost, srv.URL, `{"a":1}`)
	start := time.Now()
	// 1 s, not less: each attempt must reach the server within it, however
	// loaded the machine, or the count below would be off.
	resp, err := tr.RoundTrip(req.WithContext(WithAttemptTimeout(ctx, time.Second)))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Less(t, time.Since(start), 4*time.Second)
	require.Equal(t, 2, srv.count())
	sameKey(t, srv.requests())
	require.Equal(t, 2, onlyRecordIn(t, tr.journal).Attempts)
}

// A POST WithoutJournal is not written down, but its retries within the call
// carry one in-memory key, so a retry after a lost response is safe.
func TestWithoutJournalRetriesWithAnInMemoryKey(t *testing.T) {
	t.Parallel()
	tr, _, srv := memScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 { // the server acts, then the connection drops
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
			return
		}
		reply(w, http.StatusCreated)
	})
	req := newRequest(t, http.MethodPost, srv.URL, `{"a":1}`)
	resp, err := tr.RoundTrip(req.WithContext(WithoutJournal(req.Context())))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	reqs := srv.requests()
	require.Len(t, reqs, 2)
	sameKey(t, reqs)
	sameBytes(t, reqs[0].Body, reqs[1].Body)
	recs, err := listRecords(tr.journal)
	require.NoError(t, err)
	require.Empty(t, recs, "nothing journaled")

	// A caller's key is used as is.
	req = newRequest(t, http.MethodPost, srv.URL, `{"a":2}`)
	resp, err = tr.RoundTrip(req.WithContext(WithoutJournal(WithKey(req.Context(), "caller-key-1"))))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, "caller-key-1", srv.requests()[2].Header.Get(DefaultKeyHeader))
	recs, err = listRecords(tr.journal)
	require.NoError(t, err)
	require.Empty(t, recs, "WithKey does not override WithoutJournal")
}

// WithoutJournal lets a body over MaxBodyBytes through, sent once.
func TestWithoutJournalAllowsALargeBodyOnce(t *testing.T) {
	tr, _, srv := memScenario(t, &Options{MaxBodyBytes: 16}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	big := strings.Repeat("x", 100)

	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, big))
	require.ErrorIs(t, err, ErrBodyTooLarge, "journaled: refused")
	require.Zero(t, srv.count())

	req := newRequest(t, http.MethodPost, srv.URL, big)
	resp, err := tr.RoundTrip(req.WithContext(WithoutJournal(req.Context())))
	require.NoError(t, err, "unjournaled: the last response, nil error")
	drain(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, 1, srv.count(), "sent once, never retried")
	require.Equal(t, big, string(srv.requests()[0].Body))
	require.Equal(t, "attempt=1; max=1", srv.requests()[0].Header.Get(AttemptHeader))
}

// Per-call limits on Resume's context apply to every operation it sends.
func TestResumeHonoursCallLimitsOnItsContext(t *testing.T) {
	tr, clk, srv := memScenario(t, &Options{MaxAttempts: 1}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"a":1}`))
	pendingErr(t, err)
	clk.Advance(time.Hour)

	require.ErrorIs(t, tr.Resume(WithMaxAttempts(context.Background(), 0), nil), ErrInvalidRequest)
	require.Equal(t, 1, srv.count())

	var outs []Outcome
	require.NoError(t, tr.Resume(WithMaxAttempts(context.Background(), 3), func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 1)
	var pe *PendingError
	require.True(t, errors.As(outs[0].Err, &pe))
	require.Equal(t, 4, srv.count(), "1 + 3 attempts")
	require.Equal(t, "attempt=3; max=3", srv.requests()[3].Header.Get(AttemptHeader))
}
