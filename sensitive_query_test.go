// Tests for Options.SensitiveQueryParams: what the journaled URL keeps, and
// how the stripped URL makes up an operation's fingerprint.

package idem

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStoredURLStripsSensitiveQuery(t *testing.T) {
	sensitive := map[string]bool{"token": true, "sig": true}
	for _, tc := range []struct {
		in, want string
		dropped  []string
	}{
		{"https://api.test/p?a=1&token=t1&b=2", "https://api.test/p?a=1&b=2", []string{"token"}},
		{"https://api.test/p?token=t1", "https://api.test/p", []string{"token"}},
		{"https://api.test/p?sig=s&token=t1&token=t2", "https://api.test/p", []string{"sig", "token"}},
		{"https://api.test/p?to%6Ben=t1&z=%20", "https://api.test/p?z=%20", []string{"token"}}, // decoded name
		{"https://api.test/p?Token=t1&tokens=2", "https://api.test/p?Token=t1&tokens=2", nil},  // exact match only
		{"https://api.test/p?b=2&a=1&b=1", "https://api.test/p?b=2&a=1&b=1", nil},              // order and bytes kept
		{"https://api.test/p?a=1#access_token=t1", "https://api.test/p?a=1", nil},              // the fragment is never sent
		{"https://api.test/p?a=1&&token=t1", "https://api.test/p?a=1&", []string{"token"}},
		{"https://u:pw@api.test/p?token=t1&a=1", "https://api.test/p?a=1", []string{"token"}},
		{"https://api.test/p?%zz=1&token=t1", "https://api.test/p?%zz=1", []string{"token"}},
	} {
		u, err := url.Parse(tc.in)
		require.NoError(t, err, tc.in)
		got, dropped := storedURL(u, sensitive)
		require.Equal(t, tc.want, got, tc.in)
		require.Equal(t, tc.dropped, dropped, tc.in)
	}
	// An opaque URL hiding userinfo and the parameter is stripped too.
	u := &url.URL{Scheme: "https", Opaque: "//u:pw@api.test/p", RawQuery: "token=t1&a=1"}
	got, dropped := storedURL(u, sensitive)
	require.Equal(t, "https://api.test/p?a=1", got)
	require.Equal(t, []string{"token"}, dropped)
}

func TestSensitiveQueryFingerprint(t *testing.T) {
	// The fingerprint is taken without the sensitive parameters: calling
	// again with a fresh token, under a declared identity, is the same
	// operation, and the server gets that call's token on the wire; a change
	// to another parameter is another request. (With no identity declared,
	// a fresh token is other credentials: identity_test.go.)
	tr, clk, srv := memScenario(t, &Options{MaxAttempts: 1, SensitiveQueryParams: []string{"token"}},
		func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				reply(w, http.StatusServiceUnavailable)
				return
			}
			reply(w, http.StatusCreated)
		})
	var queries []string
	base := tr.cfg.Base
	tr.cfg.Base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		queries = append(queries, r.URL.RawQuery)
		return base.RoundTrip(r)
	})
	call := func(query string) (*http.Response, error) {
		req := newRequest(t, http.MethodPost, srv.URL+"/payments?"+query, paymentBody("order-q1", 100))
		return tr.RoundTrip(req.WithContext(WithIdentity(WithOperationID(context.Background(), "op-q1"), "tenant-q")))
	}
	_, err := call("a=1&token=first")
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
	resp, err := call("a=1&token=second")
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, []string{"a=1&token=first", "a=1&token=second"}, queries)
	sameKey(t, srv.requests())

	_, err = call("a=2&token=second")
	require.ErrorIs(t, err, ErrKeyReuse)
	require.NotContains(t, err.Error(), "second", "the error shows the URL as journaled")
	require.Len(t, queries, 2, "nothing sent")
}
