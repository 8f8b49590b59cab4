// idempotency_test.go tests the server side of the Idempotency-Key protocol: replay, 409
// while in progress, 422 on another fingerprint, key forms, scoping and expiry.

package testserver

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReplay(t *testing.T) {
	s := newTestServer(t, nil)
	first := post(t, s, "k", payBody("r", 100))
	require.Equal(t, http.StatusCreated, first.status)

	again := post(t, s, "k", payBody("r", 100))
	require.Equal(t, http.StatusCreated, again.status)
	require.Equal(t, "true", again.header.Get(replayedHeader))
	require.Equal(t, first.body, again.body)
	require.Equal(t, first.header.Get("Location"), again.header.Get("Location"))

	l := s.Ledger()
	require.Equal(t, map[string]int{"r": 1}, l.Effects)
	require.Equal(t, 1, l.Replays)
}

func TestConcurrentSameKeyRunsOnce(t *testing.T) {
	s := newTestServer(t, &Options{Lease: 3 * time.Second})
	// A stopped clock: the holder's lease never runs down; Retry-After is the middleware's
	// estimate of the handler's time (1 s, none seen yet), not the 3 s of lease.
	now := time.Now()
	s.SetNow(func() time.Time { return now })
	s.Script(Fault{Kind: FaultHold, Delay: time.Minute})

	var wg sync.WaitGroup
	var first answer
	var firstErr error
	req := postReq(t, s, "k", payBody("r", 1))
	wg.Go(func() { first, firstErr = do(t, req, time.Minute) })
	waitHolding(t, s, 1)

	// Same key while the first is held: 409, whatever the order of the JSON keys.
	for range 3 {
		a := post(t, s, "k", `{"reference": "r", "currency": "eur", "amount": 1}`)
		require.Equal(t, http.StatusConflict, a.status, "body %s", a.body)
		require.Equal(t, "1", a.header.Get("Retry-After"))
		require.Equal(t, "key-in-progress", problemType(t, a))
	}

	s.ReleaseHolds()
	wg.Wait()
	require.NoError(t, firstErr)
	require.Equal(t, http.StatusCreated, first.status)
	require.Empty(t, first.header.Get(replayedHeader))

	a := post(t, s, "k", payBody("r", 1))
	require.Equal(t, "true", a.header.Get(replayedHeader))
	require.Equal(t, first.body, a.body)

	l := s.Ledger()
	require.Equal(t, map[string]int{"r": 1}, l.Effects)
	require.Equal(t, 3, l.InProgress)
	require.Equal(t, 1, l.Faults["hold"])
}

func TestConcurrentSameKeyRace(t *testing.T) {
	// Without any hold, many simultaneous requests with one key still make one payment.
	s := newTestServer(t, nil)
	var wg sync.WaitGroup
	answers := make([]answer, 16)
	errs := make([]error, len(answers))
	for i := range answers {
		req := postReq(t, s, "k", payBody("r", 1))
		wg.Go(func() { answers[i], errs[i] = do(t, req, 10*time.Second) })
	}
	wg.Wait()
	for i, a := range answers {
		require.NoError(t, errs[i])
		require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, a.status)
	}
	require.Equal(t, map[string]int{"r": 1}, s.Ledger().Effects)
}

func TestFingerprint(t *testing.T) {
	s := newTestServer(t, nil)
	require.Equal(t, http.StatusCreated, post(t, s, "k", `{"amount": 5, "currency": "eur", "reference": "r", "meta": {"b": 1, "a": 2}}`).status)

	// Key order, white space and the spelling of a number do not matter.
	for _, body := range []string{
		`{"meta":{"a":2,"b":1},"reference":"r","currency":"eur","amount":5}`,
		`{"amount": 5, "currency": "eur", "reference": "r", "meta": {"b": 1, "a": 2.0}}`,
		`{"amount": 5, "currency": "eur", "reference": "r", "meta": {"b": 1e0, "a": 20e-1}}`,
	} {
		a := post(t, s, "k", body)
		require.Equal(t, http.StatusCreated, a.status, "body %s", a.body)
		require.Equal(t, "true", a.header.Get(replayedHeader), "%s", body)
	}

	for name, body := range map[string]string{
		"amount":       `{"amount": 6, "currency": "eur", "reference": "r", "meta": {"b": 1, "a": 2}}`,
		"nested":       `{"amount": 5, "currency": "eur", "reference": "r", "meta": {"b": 1, "a": 3}}`,
		"extra field":  `{"amount": 5, "currency": "eur", "reference": "r", "meta": {"b": 1, "a": 2}, "x": null}`,
		"no extra one": payBody("r", 5),
	} {
		a := post(t, s, "k", body)
		require.Equal(t, http.StatusUnprocessableEntity, a.status, "%s: body %s", name, a.body)
		require.Equal(t, "key-reused", problemType(t, a))
	}
	l := s.Ledger()
	require.Equal(t, 4, l.Mismatches)
	require.Equal(t, 3, l.Replays)
	require.Equal(t, map[string]int{"r": 1}, l.Effects)
}

func TestKeyForms(t *testing.T) {
	s := newTestServer(t, nil)
	require.Equal(t, http.StatusCreated, post(t, s, `"abc"`, payBody("r", 1)).status)
	a := post(t, s, "abc", payBody("r", 1))
	require.Equal(t, "true", a.header.Get(replayedHeader), "quoted and bare name one key")

	require.Equal(t, http.StatusCreated, post(t, s, `"a\"b\\c"`, payBody("q", 1)).status)
	a = post(t, s, `a"b\c`, payBody("q", 1))
	require.Equal(t, "true", a.header.Get(replayedHeader), "sf-string escapes")

	// Malformed: an unterminated or badly escaped sf-string, non-ASCII, a space inside, an
	// empty key (which the old testserver took for no key).
	for _, bad := range []string{`"abc`, `"a"b"`, `"a\b"`, `"é"`, "é", "a b", `""`} {
		a := post(t, s, bad, payBody("bad", 1))
		require.Equal(t, http.StatusBadRequest, a.status, "key %q", bad)
		require.Equal(t, "key-malformed", problemType(t, a), "key %q", bad)
	}
	require.Equal(t, map[string]int{"r": 1, "q": 1}, s.Ledger().Effects)
}

func TestMissingKey(t *testing.T) {
	t.Run("required", func(t *testing.T) {
		s := newTestServer(t, &Options{RequireKey: true})
		a := post(t, s, "", payBody("r", 1))
		require.Equal(t, http.StatusBadRequest, a.status)
		require.Equal(t, "key-missing", problemType(t, a))
		// An empty sf-string is a malformed key, not a missing one.
		a = post(t, s, `""`, payBody("r", 1))
		require.Equal(t, http.StatusBadRequest, a.status)
		require.Equal(t, "key-malformed", problemType(t, a))
		l := s.Ledger()
		require.Equal(t, 1, l.MissingKey)
		require.Empty(t, l.Effects)
	})
	t.Run("optional", func(t *testing.T) {
		s := newTestServer(t, nil)
		require.Equal(t, http.StatusCreated, post(t, s, "", payBody("r", 1)).status)
		a := post(t, s, "", payBody("r", 1))
		require.Equal(t, http.StatusCreated, a.status)
		require.Empty(t, a.header.Get(replayedHeader))
		// No key, no protection: the retry is a second payment, and the ledger says so.
		require.Equal(t, map[string]int{"r": 2}, s.Ledger().Effects)
		require.Equal(t, []string{"r"}, s.Ledger().Duplicates())
	})
	t.Run("custom header", func(t *testing.T) {
		s := newTestServer(t, &Options{KeyHeader: "X-Request-Key", RequireKey: true})
		require.Equal(t, http.StatusBadRequest, post(t, s, "k", payBody("r", 1)).status)
		require.Equal(t, http.StatusCreated, post(t, s, "", payBody("r", 1), "X-Request-Key", "k").status)
		a := post(t, s, "", payBody("r", 1), "X-Request-Key", "k")
		require.Equal(t, "true", a.header.Get(replayedHeader))
	})
}

func TestKeyScopedByIdentity(t *testing.T) {
	s := newTestServer(t, nil)
	alice := []string{"Authorization", "Bearer alice"}
	bob := []string{"Authorization", "Bearer bob"}

	a := post(t, s, "k", payBody("r", 1), alice...)
	require.Equal(t, http.StatusCreated, a.status)

	// Bob's "k" is his own operation: not Alice's replay, and not a 422 either.
	b := post(t, s, "k", payBody("other", 2), bob...)
	require.Equal(t, http.StatusCreated, b.status)
	require.Empty(t, b.header.Get(replayedHeader))
	require.NotEqual(t, a.body, b.body)

	// Anonymous is a third identity.
	c := post(t, s, "k", payBody("r", 1))
	require.Equal(t, http.StatusCreated, c.status)
	require.Empty(t, c.header.Get(replayedHeader))

	again := post(t, s, "k", payBody("r", 1), alice...)
	require.Equal(t, "true", again.header.Get(replayedHeader))
	require.Equal(t, a.body, again.body)
}

func TestKeyTTL(t *testing.T) {
	s := newTestServer(t, &Options{KeyTTL: time.Hour})
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	s.SetNow(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }

	require.Equal(t, http.StatusCreated, post(t, s, "k", payBody("r", 1)).status)
	advance(time.Hour - time.Second)
	require.Equal(t, "true", post(t, s, "k", payBody("r", 1)).header.Get(replayedHeader))

	advance(time.Second)
	a := post(t, s, "k", payBody("r", 1))
	require.Equal(t, http.StatusCreated, a.status)
	require.Empty(t, a.header.Get(replayedHeader), "expired: the key is new again")
	require.Equal(t, map[string]int{"r": 2}, s.Ledger().Effects)

	// An expired key also accepts another body.
	advance(2 * time.Hour)
	require.Equal(t, http.StatusCreated, post(t, s, "k", payBody("r2", 7)).status)
}
