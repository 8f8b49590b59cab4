// Review (issue 5, item 3), fixed: a sensitive parameter in the URL's
// fragment. net/http never sends a fragment, yet storedURL journaled it
// verbatim, so "#access_token=..." (the OAuth implicit-flow shape) landed in
// a plaintext journal's bytes. The journaled URL now leaves the fragment
// out; Resume loses nothing.

package idem

import (
	"bytes"
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
	require.NoError(t, tr.journal.Close())
	raw, err := os.ReadFile(tr.journal.Path())
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(secret)), "the journal file holds the sensitive parameter's value")
}
