// reference_test.go tests GET /payments?reference=, the lookup a client reconciles with.

package testserver

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestListPaymentsByReference(t *testing.T) {
	s := newTestServer(t, nil)
	list := func(query string) (int, []payment) {
		t.Helper()
		a := get(t, s, "/payments"+query)
		if a.status != http.StatusOK {
			return a.status, nil
		}
		require.Equal(t, "application/json", a.header.Get("Content-Type"))
		var l paymentList
		require.NoError(t, json.Unmarshal(a.body, &l), "%s", a.body)
		require.NotNil(t, l.Data, `"data" is [] when nothing matches: %s`, a.body)
		return a.status, l.Data
	}

	status, none := list("?reference=order-1")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, none)

	one := decodePayment(t, post(t, s, "k1", payBody("order-1", 100)))
	post(t, s, "k1", payBody("order-1", 100)) // a replay makes no second payment
	post(t, s, "k2", payBody("order-2", 200))
	_, got := list("?reference=order-1")
	require.Equal(t, []payment{one}, got)

	// A second key for the same reference is a duplicate, and the lookup shows it.
	two := decodePayment(t, post(t, s, "k3", payBody("order-1", 100)))
	_, got = list("?reference=order-1")
	require.ElementsMatch(t, []payment{one, two}, got)
	require.Less(t, got[0].ID, got[1].ID, "ordered by ID")

	status, _ = list("")
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = list("?reference=")
	require.Equal(t, http.StatusBadRequest, status)
}
