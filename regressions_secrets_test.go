// Review (issue 5, item 3), fixed: a sensitive parameter in the URL's
// fragment. net/http never sends a fragment, yet storedURL journaled it
// verbatim, so "#access_token=..." (the OAuth implicit-flow shape) landed in
// a plaintext journal's bytes. The journaled URL now leaves the fragment
// out; Resume loses nothing.

package idem

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReviewSensitiveParamInFragmentNotJournaled(t *testing.T) {
	const secret = "FRAGSECRET-9d8e7f"
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 1, SensitiveQueryParams: []string{"access_token"}},
		func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusServiceUnavailable) })
	req := newRequest(t, http.MethodPost, srv.URL+"/payments?a=1&access_token="+secret+"#access_token="+secret,
		paymentBody("order-frag", 1))
	_, err := tr.RoundTrip(req)
	pendingErr(t, err)
	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(secret)), "the journal file holds the sensitive parameter's value")
}

type quotingBase struct{}

func (quotingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("proxy failed for %s (redacted %s)", r.URL, r.URL.Redacted())
}

// Review (final), fixed: a base RoundTripper that quotes the URL in its error
// put the fragment, and a percent-encoded query value, in LastError, which
// the journal keeps in plaintext. maskErr now masks the URL as quoted, the
// fragment, and each query value as written.
func TestReviewURLQuotedInErrorNotJournaled(t *testing.T) {
	const frag, query = "FRAGSECRET123", "tok%2Fen-77"
	tr, _ := testTransport(t, &Options{Base: quotingBase{}, MaxAttempts: 1, SensitiveQueryParams: []string{"key"}})
	req := newRequest(t, http.MethodPost, "https://user:pw-secret-9@api.test/p?key="+query+"#access_token="+frag,
		paymentBody("order-quoted", 1))
	_, err := tr.RoundTrip(req)
	pendingErr(t, err)
	rec := onlyRecord(t, tr)
	require.Contains(t, rec.LastError, "proxy failed for https://api.test/p")
	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	for _, secret := range []string{frag, query, "tok/en-77", "pw-secret-9"} {
		require.False(t, bytes.Contains(raw, []byte(secret)), "the journal file holds %q", secret)
	}
}
