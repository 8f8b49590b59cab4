// server_test.go tests the plain API and the server's lifecycle; idempotency_test.go and
// fault_test.go test the rest.

package testserver

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCreatePayment(t *testing.T) {
	s := newTestServer(t, nil)

	a := post(t, s, "k1", payBody("order-1", 1250))
	require.Equal(t, http.StatusCreated, a.status, "body %s", a.body)
	require.Empty(t, a.header.Get(replayedHeader))
	require.Equal(t, "application/json", a.header.Get("Content-Type"))
	p := decodePayment(t, a)
	require.True(t, strings.HasPrefix(p.ID, "pay_"), p.ID)
	require.Equal(t, payment{ID: p.ID, Amount: 1250, Currency: "eur", Reference: "order-1"}, p)
	require.Equal(t, "/payments/"+p.ID, a.header.Get("Location"))

	g := get(t, s, "/payments/"+p.ID)
	require.Equal(t, http.StatusOK, g.status)
	require.Equal(t, p, decodePayment(t, g))

	require.Equal(t, http.StatusNotFound, get(t, s, "/payments/pay_nope").status)

	l := s.Ledger()
	require.Equal(t, map[string]int{"order-1": 1}, l.Effects)
	require.Equal(t, 1, l.Requests)
	require.NoError(t, l.Check([]string{"order-1"}))
}

func TestInvalidBody(t *testing.T) {
	// Not JSON: the middleware cannot fingerprint it and answers 400 itself (a problem
	// detail), before any claim.
	for name, body := range map[string]string{
		"not JSON":      `{"amount": 1`,
		"trailing data": payBody("r", 1) + ` {}`,
		"duplicate":     `{"amount": 1, "amount": 2, "currency": "eur", "reference": "r"}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newTestServer(t, nil)
			a := post(t, s, "k", body)
			require.Equal(t, http.StatusBadRequest, a.status, "body %s", a.body)
			require.Equal(t, "body-invalid", problemType(t, a))
			a = post(t, s, "k", payBody("r", 1))
			require.Equal(t, http.StatusCreated, a.status)
			require.Empty(t, a.header.Get(replayedHeader))
		})
	}
	// JSON but not a payment: the handler answers 400 and discards its answer, so the key
	// is free again (as Stripe does for a request that fails validation).
	for name, body := range map[string]string{
		"no amount":        `{"currency": "eur", "reference": "r"}`,
		"zero amount":      `{"amount": 0, "currency": "eur", "reference": "r"}`,
		"fraction":         `{"amount": 1.5, "currency": "eur", "reference": "r"}`,
		"no currency":      `{"amount": 1, "reference": "r"}`,
		"empty reference":  `{"amount": 1, "currency": "eur", "reference": ""}`,
		"not an object":    `[1, 2]`,
		"wrong field type": `{"amount": "1", "currency": "eur", "reference": "r"}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newTestServer(t, nil)
			a := post(t, s, "k", body)
			require.Equal(t, http.StatusBadRequest, a.status, "body %s", a.body)
			var e apiError
			require.NoError(t, json.Unmarshal(a.body, &e))
			require.Equal(t, "invalid_request", e.Code)
			// Nothing stored: the same key with a valid body is a new operation.
			a = post(t, s, "k", payBody("r", 1))
			require.Equal(t, http.StatusCreated, a.status)
			require.Empty(t, a.header.Get(replayedHeader))
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	s := newTestServer(t, &Options{MaxBodyBytes: 100})
	big := `{"amount": 1, "currency": "eur", "reference": "big", "pad": "` + strings.Repeat("x", 200) + `"}`

	a := post(t, s, "k", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status)

	// Without Content-Length the limit is enforced while reading.
	req := postReq(t, s, "k", "")
	req.Body = io.NopCloser(strings.NewReader(big))
	req.GetBody = nil
	req.ContentLength = -1
	a, err := do(t, req, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status)

	require.Empty(t, s.Ledger().Effects)
	a = post(t, s, "k", payBody("big", 1))
	require.Equal(t, http.StatusCreated, a.status, "the key was not stored")
	require.Empty(t, a.header.Get(replayedHeader))
}

func TestLedgerEndpoint(t *testing.T) {
	s := newTestServer(t, nil)
	require.Equal(t, http.StatusCreated, post(t, s, "k1", payBody("a", 1)).status)
	require.Equal(t, http.StatusCreated, post(t, s, "k1", payBody("a", 1)).status)
	require.Equal(t, http.StatusCreated, post(t, s, "k2", payBody("a", 1)).status)
	s.Script(Fault{Kind: FaultStatus, Status: 503})
	require.Equal(t, http.StatusServiceUnavailable, post(t, s, "k3", payBody("b", 1)).status)

	a := get(t, s, "/_ledger")
	require.Equal(t, http.StatusOK, a.status)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(a.body, &raw))
	require.Contains(t, raw, "effects")
	require.Contains(t, raw, "replays")
	var l Ledger
	require.NoError(t, json.Unmarshal(a.body, &l))
	require.Equal(t, s.Ledger(), l)
	require.Equal(t, Ledger{
		Effects:    map[string]int{"a": 2},
		Requests:   4,
		Replays:    1,
		Faults:     map[string]int{"503": 1},
		StoreCalls: map[string]int{},
	}, l)
	require.Equal(t, []string{"a"}, l.Duplicates())
}

func TestCloseDoesNotHang(t *testing.T) {
	s := NewServer(&Options{Logf: t.Logf})
	s.Script(Fault{Kind: FaultHold, Delay: time.Hour}, Fault{Kind: FaultSlowResponse, Delay: time.Hour})

	type reply struct {
		a   answer
		err error
	}
	replies := make(chan reply, 2)
	send := func(req *http.Request) {
		a, err := do(t, req, time.Minute)
		replies <- reply{a, err}
	}
	go send(postReq(t, s, "held", payBody("held", 1)))
	waitHolding(t, s, 1)
	go send(postReq(t, s, "slow", payBody("slow", 1)))
	require.Eventually(t, func() bool { return s.Ledger().Effects["slow"] == 1 }, 5*time.Second, time.Millisecond)

	start := time.Now()
	s.Close()
	require.Less(t, time.Since(start), 2*time.Second)
	s.Close() // a second Close is harmless

	got := map[int]int{}
	for range 2 {
		r := <-replies
		require.NoError(t, r.err)
		got[r.a.status]++
	}
	// The held request was aborted unprocessed; the slow one answered at once.
	require.Equal(t, map[int]int{http.StatusServiceUnavailable: 1, http.StatusCreated: 1}, got)
	require.Equal(t, map[string]int{"slow": 1}, s.Ledger().Effects)
}

func TestClientAndIdleConnections(t *testing.T) {
	s := NewServer(nil)
	resp, err := s.Client().Get(s.URL + "/_ledger")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	// An idle keep-alive connection and a connection that never sends a request must not
	// delay Close.
	var d net.Dialer
	c, err := d.DialContext(t.Context(), "tcp", strings.TrimPrefix(s.URL, "http://"))
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	s.Close()
	require.Less(t, time.Since(start), 2*time.Second)
}
