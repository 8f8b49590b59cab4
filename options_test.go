// Tests for options.go: the default lists are functions returning fresh
// slices, zero means the default, and every constructor refuses an Options
// value with no meaning with ErrInvalidOptions naming the field.

package idem

import (
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
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

func TestBadInputOptions(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		opts Options
		want string // the message names the field and its value
	}{
		{"MaxBodyBytes negative", Options{MaxBodyBytes: -1}, "MaxBodyBytes -1 is negative"},
		{"KeyTTL negative", Options{KeyTTL: -time.Hour}, "KeyTTL -1h0m0s is negative"},
		{"Retention negative", Options{Journal: boltjournal.Options{Retention: -time.Second}}, "Retention -1s is negative"},
		{"OpenTimeout negative", Options{Journal: boltjournal.Options{OpenTimeout: -time.Second}}, "OpenTimeout -1s is negative"},
		{"MaxAttempts negative", Options{MaxAttempts: -1}, "MaxAttempts -1 is negative"},
		{"InitialInterval negative", Options{InitialInterval: -time.Millisecond}, "InitialInterval -1ms is negative"},
		{"MaxInterval negative", Options{MaxInterval: -time.Second}, "MaxInterval -1s is negative"},
		{"MaxInterval one nanosecond below zero", Options{MaxInterval: -1}, "MaxInterval -1ns is negative"},
		{"MaxRetryAfter negative", Options{MaxRetryAfter: -time.Second}, "MaxRetryAfter -1s is negative"},
		{"AttemptTimeout negative", Options{AttemptTimeout: -time.Second}, "AttemptTimeout -1s is negative"},
		{"ResumeConcurrency negative", Options{ResumeConcurrency: -1}, "ResumeConcurrency -1 is negative"},
		{"ResumeInterval negative", Options{ResumeInterval: -time.Second}, "ResumeInterval -1s is negative"},
		{"CloseTimeout negative", Options{CloseTimeout: -time.Second}, "CloseTimeout -1s is negative"},
		{"Multiplier below 1", Options{Multiplier: 0.5}, "Multiplier 0.5 is not a finite number >= 1"},
		{"Multiplier negative", Options{Multiplier: -2}, "Multiplier -2 is not"},
		{"Multiplier NaN", Options{Multiplier: nan}, "Multiplier NaN is not"},
		{"Multiplier +Inf", Options{Multiplier: inf}, "Multiplier +Inf is not"},
		{"Multiplier -Inf", Options{Multiplier: -inf}, "Multiplier -Inf is not"},
		{"RandomizationFactor negative", Options{RandomizationFactor: -0.1}, "RandomizationFactor -0.1 is outside [0, 1]"},
		{"RandomizationFactor just above 1", Options{RandomizationFactor: math.Nextafter(1, 2)}, "RandomizationFactor 1.0000000000000002 is outside [0, 1]"},
		{"RandomizationFactor 2", Options{RandomizationFactor: 2}, "RandomizationFactor 2 is outside [0, 1]"},
		{"RandomizationFactor NaN", Options{RandomizationFactor: nan}, "RandomizationFactor NaN is outside [0, 1]"},
		{"RandomizationFactor +Inf", Options{RandomizationFactor: inf}, "RandomizationFactor +Inf is outside [0, 1]"},
		{"RandomizationFactor -Inf", Options{RandomizationFactor: -inf}, "RandomizationFactor -Inf is outside [0, 1]"},
		{"RetryBudget.Ratio NaN", Options{RetryBudget: RetryBudget{Ratio: nan}}, "RetryBudget.Ratio NaN"},
		{"RetryBudget.Burst negative", Options{RetryBudget: RetryBudget{Burst: -1}}, "RetryBudget.Burst -1"},
		{"Backoff with Multiplier", Options{Backoff: constBackoff(time.Second), Multiplier: 2},
			"Backoff replaces the exponential backoff: Multiplier 2 and RandomizationFactor 0 must be zero"},
		{"Backoff with RandomizationFactor", Options{Backoff: constBackoff(time.Second), RandomizationFactor: 0.5},
			"Backoff replaces the exponential backoff: Multiplier 0 and RandomizationFactor 0.5 must be zero"},
		{"KeyHeader with a space", Options{KeyHeader: "Idempotency Key"}, `KeyHeader "Idempotency Key" is not a valid header name`},
		{"KeyHeader with a colon", Options{KeyHeader: "Idempotency-Key:"}, `KeyHeader "Idempotency-Key:" is not a valid header name`},
		{"KeyHeader non-ASCII", Options{KeyHeader: "ключ"}, `KeyHeader "ключ" is not a valid header name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idem.journal")
			builds := map[string]func() (any, error){
				"Open": func() (any, error) { return Open(path, &tc.opts) },
			}
			if tc.opts.Journal != (boltjournal.Options{}) {
				// The journal's own options: boltjournal.Open takes only those
				// (NewTransport refuses any: TestNewTransportRefusesJournalOptions).
				builds["boltjournal.Open"] = func() (any, error) { return boltjournal.Open(path, &tc.opts.Journal) }
			} else {
				builds["NewTransport"] = func() (any, error) { return NewTransport(nil, &tc.opts) }
			}
			for name, build := range builds {
				v, err := bounded(t, build)
				require.ErrorIs(t, err, ErrInvalidOptions, name)
				require.True(t, strings.HasPrefix(err.Error(), "idem: invalid options: "+tc.want), "%s: %v", name, err)
				require.Nil(t, v, name)
			}
			_, err := os.Stat(path)
			require.ErrorIs(t, err, os.ErrNotExist, "no journal file is created for refused options")
		})
	}
}

// An empty name in Options.SensitiveQueryParams is refused (ErrInvalidOptions):
// stripQuery would cut every empty query part ("a=1&&b=2") or nameless one
// ("=v") and record "" in DroppedQuery, which url.Values never holds, so Resume
// would report ErrSensitiveQueryMissing whatever PrepareResume did.
func TestReviewEmptySensitiveQueryParamRefused(t *testing.T) {
	opts := &Options{SensitiveQueryParams: []string{"token", ""}}
	_, err := Open(filepath.Join(t.TempDir(), "q.journal"), opts)
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = NewTransport(nil, opts)
	require.ErrorIs(t, err, ErrInvalidOptions)
}

// Options.Journal is Open's: NewTransport, given a Store opened already,
// refuses it rather than leave an Encryption keyring silently unused, which
// would write the request in clear while its caller believes it sealed.
func TestNewTransportRefusesJournalOptions(t *testing.T) {
	keys := &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": make([]byte, boltjournal.KeySize)}}
	for name, jopts := range map[string]boltjournal.Options{
		"Encryption":  {Encryption: keys},
		"Retention":   {Retention: time.Hour},
		"OpenTimeout": {OpenTimeout: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := NewTransport(memStore(t), &Options{Journal: jopts})
			require.Nil(t, tr)
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.Contains(t, err.Error(), "Options.Journal")
		})
	}
	tr, err := NewTransport(memStore(t), &Options{})
	require.NoError(t, err)
	require.NotNil(t, tr)
}
