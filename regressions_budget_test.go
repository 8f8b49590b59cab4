// Review (issue 5, item 2): retry-budget accounting around Resume.

package idem

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func reviewPost(t *testing.T, url, op string) *http.Request {
	req := newRequest(t, http.MethodPost, url+"/payments", paymentBody(op, 1))
	return req.WithContext(WithOperationID(context.Background(), op))
}

// An operation past KeyTTL is never sent again, only marked expired, so it
// needs no retry token. But resumeDue asks the budget before resume() looks
// at KeyTTL (resume.go: the budget.retry call in the launch loop): while a
// failing host keeps getting first attempts (no quiet second for a probe)
// and its bucket is empty, Resume reports the expired operation as
// "pending, retry budget exhausted" and leaves it pending, pass after pass,
// instead of ErrKeyExpired, which is what tells the caller to reconcile it.
// Fixed: expiry is decided before the budget is asked.
func TestReviewResumeExpiryNotHeldByBudget(t *testing.T) {
	tr, clk, srv := newScenario(t, &Options{KeyTTL: time.Hour, MaxAttempts: 2, RetryBudget: RetryBudget{Burst: 1}},
		func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusServiceUnavailable) })
	_, err := tr.RoundTrip(reviewPost(t, srv.URL, "old"))
	pendingErr(t, err) // 503, a retry (the bucket's one token), 503
	require.Equal(t, 2, srv.count())

	clk.Advance(2 * time.Hour) // "old" is past KeyTTL
	_, err = tr.RoundTrip(reviewPost(t, srv.URL, "new"))
	require.ErrorIs(t, err, ErrRetryBudgetExhausted, "the host is failing and the bucket is empty")

	outs := resumeAll(t, tr)
	require.Len(t, outs, 1, "only the expired one is due")
	require.Equal(t, "old", outs[0].Record.OperationID)
	require.ErrorIs(t, outs[0].Err, ErrKeyExpired, "got %v", outs[0].Err)
	rec, err := tr.bolt().Lookup("old")
	require.NoError(t, err)
	require.Equal(t, StateExpired, rec.State)
}

// A probe (an empty bucket's one retry per quiet second) takes no token, but
// when Resume's probe is not sent after all (PrepareResume fails, a
// credential is missing, the operation expired or settled meanwhile),
// resumeDue "gives the token back" (resume.go: budget.add(host, token)) and
// so mints one. Here a Resume pass that sends nothing leaves the host's
// empty bucket with a whole token, which then pays for a retry that the
// budget should have denied during the outage. Fixed: an
// unsent probe gives back the probe (the quiet time), not a token.
func TestReviewUnsentProbeMintsNoToken(t *testing.T) {
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 2, RetryBudget: RetryBudget{Burst: 1}},
		func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusServiceUnavailable) })
	host := strings.TrimPrefix(srv.URL, "http://")

	// An operation with a credential that no PrepareResume puts back.
	req := reviewPost(t, srv.URL, "needs-auth")
	req.Header.Set("Authorization", "Bearer tok-123")
	_, err := tr.RoundTrip(req)
	pendingErr(t, err) // 503, a retry (the bucket's one token), 503
	before := tr.budget.available(host)
	require.Less(t, before, 1.0, "the bucket is empty")

	clk.Advance(time.Hour) // due, and the host quiet: Resume may probe
	outs := resumeAll(t, tr)
	require.Len(t, outs, 1)
	require.ErrorIs(t, outs[0].Err, ErrSensitiveHeaderMissing)
	require.Equal(t, 2, srv.count(), "nothing sent")
	require.LessOrEqual(t, tr.budget.available(host), before, "a pass that sent nothing earned no token")

	// The outage goes on: a new call at the same instant gets its first
	// attempt, and no retry (no token, no quiet second).
	_, err = tr.RoundTrip(reviewPost(t, srv.URL, "next"))
	require.True(t, errors.Is(err, ErrRetryBudgetExhausted), "got %v", err)
	require.Equal(t, 3, srv.count(), "one first attempt, no retry")
}

// Review (design concern), fixed: a call that sends a pending operation again
// by its operation ID counted as a first attempt, so an application
// re-calling its own pending work during an outage went around the budget.
// It is a retry now, like Resume's re-send: denied, it sends nothing.
func TestReviewRecallOfPendingIsARetry(t *testing.T) {
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 2, RetryBudget: RetryBudget{Burst: 1}},
		func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusServiceUnavailable) })
	_, err := tr.RoundTrip(reviewPost(t, srv.URL, "again"))
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt) // 503, a retry (the bucket's one token), 503
	require.Equal(t, 2, srv.count())
	// Traffic goes on (a first attempt, so no quiet second for a probe).
	_, err = tr.RoundTrip(reviewPost(t, srv.URL, "other"))
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	require.Equal(t, 3, srv.count())

	_, err = tr.RoundTrip(reviewPost(t, srv.URL, "again"))
	pe := pendingErr(t, err)
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	require.Equal(t, "again", pe.OperationID)
	require.Equal(t, 3, srv.count(), "nothing sent")
	rec, err := tr.bolt().Lookup("again")
	require.NoError(t, err)
	require.Equal(t, StatePending, rec.State)
}
