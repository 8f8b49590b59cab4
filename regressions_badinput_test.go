// Review (issue 5, item 4), fixed: request inputs that net/http refuses
// before writing a byte (a control character or DEL in a header value, a
// port out of range) were journaled, "retried" in vain (classified ClassRetry:
// nothing was written), left pending and re-sent by every Resume until
// KeyTTL. validRequest now refuses them with ErrInvalidRequest before the
// write-ahead.

package idem

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReviewBadInputRefusedBeforeJournal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(base string) *http.Request
	}{
		{"control character 0x01 in a header value", func(base string) *http.Request {
			req := newRequest(t, http.MethodPost, base+"/payments", paymentBody("order-ctl", 1))
			req.Header["X-Note"] = []string{"a\x01b"}
			return req
		}},
		{"DEL in a header value", func(base string) *http.Request {
			req := newRequest(t, http.MethodPost, base+"/payments", paymentBody("order-del", 1))
			req.Header["X-Note"] = []string{"a\x7fb"}
			return req
		}},
		{"port out of range", func(string) *http.Request {
			return newRequest(t, http.MethodPost, "http://127.0.0.1:99999/payments", paymentBody("order-port", 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, srv := newScenario(t, &Options{MaxAttempts: 2},
				func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
			resp, err := bounded(t, func() (*http.Response, error) { return tr.RoundTrip(tc.build(srv.URL)) })
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrInvalidRequest, "got %v", err)
			require.Zero(t, srv.count(), "nothing sent")
			recs, rerr := tr.bolt().Records()
			require.NoError(t, rerr)
			require.Empty(t, recs, "nothing journaled, nothing left pending")
		})
	}
}
