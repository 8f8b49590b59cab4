// isolation_test.go proves, over real loopback HTTP, the isolation promises of doc.go: a key
// presented by another client identity (another Authorization) is a separate operation and
// never receives the first identity's stored result, even with the same body, and the two do
// not block each other; a body over MaxBodyBytes gets 413 and stores nothing under its key.

package testserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	alice = []string{"Authorization", "Bearer alice-secret"}
	bob   = []string{"Authorization", "Bearer bob-secret"}
)

func TestIdentitySameKeySameBodyIsSeparateOperation(t *testing.T) {
	s := newTestServer(t, nil)
	body := payBody("order-1", 1250)

	a := post(t, s, "K", body, alice...)
	require.Equal(t, http.StatusCreated, a.status)
	require.Empty(t, a.header.Get(replayedHeader))

	// Bob, same key, same body: processed afresh, not Alice's stored answer.
	b := post(t, s, "K", body, bob...)
	require.Equal(t, http.StatusCreated, b.status, "body %s", b.body)
	require.Empty(t, b.header.Get(replayedHeader), "another identity got a replay")
	pa, pb := decodePayment(t, a), decodePayment(t, b)
	require.NotEqual(t, pa.ID, pb.ID)
	require.NotEqual(t, a.header.Get("Location"), b.header.Get("Location"))
	require.Equal(t, map[string]int{"order-1": 2}, s.Ledger().Effects, "a second effect for the reference")

	// Each identity replays its own result and only its own.
	for _, c := range []struct {
		who  []string
		want payment
	}{{alice, pa}, {bob, pb}, {alice, pa}} {
		r := post(t, s, "K", body, c.who...)
		require.Equal(t, "true", r.header.Get(replayedHeader), "%s", c.who[1])
		require.Equal(t, c.want, decodePayment(t, r), "%s", c.who[1])
	}
	// Bob's key with another body is a 422 against Bob's own fingerprint, not Alice's.
	require.Equal(t, http.StatusUnprocessableEntity, post(t, s, "K", payBody("order-2", 1), bob...).status)

	l := s.Ledger()
	require.Equal(t, map[string]int{"order-1": 2}, l.Effects)
	require.Equal(t, 3, l.Replays)
	require.Equal(t, 1, l.Mismatches)
	require.Zero(t, l.InProgress)

	var list paymentList
	listed := get(t, s, "/payments?reference=order-1")
	require.NoError(t, json.Unmarshal(listed.body, &list))
	require.ElementsMatch(t, []payment{pa, pb}, list.Data)
}

func TestIdentityConcurrentSameKeyNoConflict(t *testing.T) {
	s := newTestServer(t, nil)
	body := payBody("order-1", 1250)
	s.Script(Fault{Kind: FaultHold, Delay: time.Minute}) // Alice's request holds the key
	var wg sync.WaitGroup
	var first answer
	var firstErr error
	req := postReq(t, s, "K", body, alice...)
	wg.Go(func() { first, firstErr = do(t, req, time.Minute) })
	waitHolding(t, s, 1)

	// While Alice's K is in progress, Bob's K runs at once: no 409, no wait.
	b := post(t, s, "K", body, bob...)
	require.Equal(t, http.StatusCreated, b.status, "body %s", b.body)
	require.Empty(t, b.header.Get(replayedHeader))
	require.EqualValues(t, 1, s.holding.Load(), "Alice still held")
	// Alice's own retry does conflict with her request in progress.
	require.Equal(t, http.StatusConflict, post(t, s, "K", body, alice...).status)

	s.ReleaseHolds()
	wg.Wait()
	require.NoError(t, firstErr)
	require.Equal(t, http.StatusCreated, first.status)
	require.Empty(t, first.header.Get(replayedHeader))
	require.NotEqual(t, decodePayment(t, first).ID, decodePayment(t, b).ID)
	l := s.Ledger()
	require.Equal(t, map[string]int{"order-1": 2}, l.Effects)
	require.Equal(t, 1, l.InProgress, "only Alice's own retry met a 409")
}

func TestIdentityConcurrentRace(t *testing.T) {
	// Many identities at once with one key and one body: each runs exactly once.
	s := newTestServer(t, nil)
	const ids = 8
	var wg sync.WaitGroup
	answers := make([]answer, ids)
	errs := make([]error, ids)
	for i := range ids {
		req := postReq(t, s, "K", payBody("order-1", 1), "Authorization", fmt.Sprintf("Bearer client-%d", i))
		wg.Go(func() { answers[i], errs[i] = do(t, req, 10*time.Second) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, a := range answers {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusCreated, a.status, "client %d: %s", i, a.body)
		seen[decodePayment(t, a).ID] = true
	}
	require.Len(t, seen, ids)
	require.Equal(t, map[string]int{"order-1": ids}, s.Ledger().Effects)
	require.Zero(t, s.Ledger().InProgress)
}

func TestBodyOverLimitStoresNothing(t *testing.T) {
	const limit = 200
	s := newTestServer(t, &Options{MaxBodyBytes: limit})
	// sized returns a valid payment body of exactly n bytes.
	sized := func(ref string, n int) string {
		b := `{"amount": 1, "currency": "eur", "reference": "` + ref + `", "pad": ""}`
		b = strings.Replace(b, `""}`, `"`+strings.Repeat("x", n-len(b))+`"}`, 1)
		require.Len(t, b, n)
		return b
	}

	// One byte over: 413, by Content-Length and while reading a chunked body.
	over := sized("big", limit+1)
	require.Equal(t, http.StatusRequestEntityTooLarge, post(t, s, "K", over, alice...).status)
	req := postReq(t, s, "K", over, alice...)
	req.ContentLength, req.GetBody = -1, nil
	a, err := do(t, req, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	require.Equal(t, "body-too-large", problemType(t, a), "the middleware's 413")
	require.Empty(t, s.Ledger().Effects)

	// The same key with a valid body is new; its result, not a 413, is what replays.
	ok := sized("big", limit)
	first := post(t, s, "K", ok, alice...)
	require.Equal(t, http.StatusCreated, first.status, "body %s", first.body)
	require.Empty(t, first.header.Get(replayedHeader), "a 413 was stored")
	again := post(t, s, "K", ok, alice...)
	require.Equal(t, "true", again.header.Get(replayedHeader))
	require.Equal(t, first.body, again.body)

	// Over the limit after the key settled: 413 again, and the stored result stands.
	require.Equal(t, http.StatusRequestEntityTooLarge, post(t, s, "K", over, alice...).status)
	again = post(t, s, "K", ok, alice...)
	require.Equal(t, "true", again.header.Get(replayedHeader))
	require.Equal(t, first.body, again.body)

	l := s.Ledger()
	require.Equal(t, map[string]int{"big": 1}, l.Effects, "no effect from any 413")
	require.Equal(t, 2, l.Replays)
	require.Zero(t, l.Mismatches)
}
