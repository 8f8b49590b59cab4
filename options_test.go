// Options' exported defaults: the default lists are functions returning fresh
// slices, so no caller can change another's defaults (issue 14, item 7).

package idem

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultListsAreFreshCopies(t *testing.T) {
	t.Parallel()
	m := DefaultMethods()
	require.Equal(t, []string{http.MethodPost, http.MethodPatch}, m)
	m[0] = http.MethodGet
	require.Equal(t, []string{http.MethodPost, http.MethodPatch}, DefaultMethods())

	h := DefaultSensitiveHeaders()
	require.Equal(t, []string{"Authorization", "Proxy-Authorization", "Cookie"}, h)
	h[0] = "X-Not-Secret"
	require.Equal(t, []string{"Authorization", "Proxy-Authorization", "Cookie"}, DefaultSensitiveHeaders())

	// A changed copy changes no Transport's configuration either.
	c, err := (*Options)(nil).config()
	require.NoError(t, err)
	require.True(t, c.methods[http.MethodPost])
	require.False(t, c.methods[http.MethodGet])
	require.True(t, c.sensitive["Authorization"])
	require.False(t, c.sensitive["X-Not-Secret"])
}

// Zero is not an error in Options: it means the documented default.
func TestBadInputOptionsZeroMeansDefault(t *testing.T) {
	tr, err := NewTransport(nil, &Options{})
	require.NoError(t, err)
	c := tr.cfg
	require.Equal(t, DefaultKeyHeader, c.KeyHeader)
	require.EqualValues(t, DefaultMaxBodyBytes, c.MaxBodyBytes)
	require.Equal(t, DefaultKeyTTL, c.KeyTTL)
	require.Equal(t, DefaultMaxAttempts, c.MaxAttempts)
	require.Equal(t, DefaultInitialInterval, c.InitialInterval)
	require.Equal(t, DefaultMultiplier, c.Multiplier)
	require.Equal(t, DefaultRandomizationFactor, c.RandomizationFactor)
	require.Equal(t, DefaultMaxInterval, c.MaxInterval)
	require.Equal(t, DefaultMaxRetryAfter, c.MaxRetryAfter)
	require.Equal(t, DefaultAttemptTimeout, c.AttemptTimeout)
	require.Equal(t, DefaultResumeConcurrency, c.ResumeConcurrency)
	require.Equal(t, DefaultResumeInterval, c.ResumeInterval)
	require.Equal(t, DefaultCloseTimeout, c.CloseTimeout)

	// And in use: MaxAttempts 0 makes DefaultMaxAttempts attempts, with the
	// default backoff between them, then leaves the operation pending.
	tr, clk, srv := newScenario(t, &Options{MaxAttempts: 0}, func(_ int, w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-zero", 1)))
	require.Nil(t, resp)
	perr := pendingErr(t, err)
	require.Equal(t, DefaultMaxAttempts, perr.Attempts)
	require.Equal(t, DefaultMaxAttempts, srv.count())
	sameKey(t, srv.requests())
	sleeps := clk.Sleeps()
	require.Len(t, sleeps, DefaultMaxAttempts-1, "no sleep after the last attempt")
	lo := time.Duration(float64(DefaultInitialInterval) * (1 - DefaultRandomizationFactor))
	hi := time.Duration(float64(DefaultInitialInterval) * (1 + DefaultRandomizationFactor))
	require.GreaterOrEqual(t, sleeps[0], lo)
	require.LessOrEqual(t, sleeps[0], hi)
	require.Equal(t, StatePending, onlyRecord(t, tr).State)
}
