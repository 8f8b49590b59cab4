// Tests that an operation's representation headers (Content-Type,
// Content-Encoding) are part of its fingerprint, while pending and once
// settled (its Header dropped), plaintext and sealed, across a restart.
// (boltjournal's legacy_test.go has records written before identities and
// representations were kept.)

package idem

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// typedPayment is tenantPayment with a Content-Type and Content-Encoding
// ("" for none).
func typedPayment(tb testing.TB, base, op, contentType, contentEncoding string) *http.Request {
	tb.Helper()
	req := tenantPayment(tb, WithOperationID(context.Background(), op), base, op, tokenAcme)
	req.Header.Del("Content-Type")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if contentEncoding != "" {
		req.Header.Set("Content-Encoding", contentEncoding)
	}
	return req
}

func TestRepresentationIsFingerprinted(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "encrypted"}[encrypted], func(t *testing.T) {
			t.Parallel()
			pay, base, rt := paymentsOver(t, encrypted)
			opts := Options{MaxAttempts: 1}
			if encrypted {
				opts.Journal.Encryption = &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": newKey32(t)}}
			}
			j, err := boltjournal.Open(filepath.Join(t.TempDir(), "repr.journal"), &opts.Journal)
			require.NoError(t, err)
			t.Cleanup(func() { j.Close() })
			tr, clk := transportOn(t, j, opts, rt, time.Time{})
			call := func(ct, ce string) (*http.Response, error) {
				return tr.RoundTrip(typedPayment(t, base, "order-r1", ct, ce))
			}
			refused := func(ct, ce string) {
				t.Helper()
				sent := pay.Ledger().Requests
				_, err := call(ct, ce)
				require.ErrorIs(t, err, ErrKeyReuse, "%q %q", ct, ce)
				requireNothingSent(t, pay, sent)
			}

			pay.Script(testserver.Fault{Kind: testserver.FaultStatus})
			_, err = call("application/json", "")
			pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
			rec, err := j.Lookup("order-r1")
			require.NoError(t, err)
			require.Equal(t, "application/json", rec.ContentType)
			refused("text/plain", "")
			refused("application/json; charset=latin1", "")
			refused("", "")
			refused("application/json", "gzip")

			// The same type spelled another way is the same request.
			resp, err := call("Application/JSON ", "")
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)
			require.NoError(t, flushStore(j))

			// Settled, its Header is gone; its representation is not.
			require.NoError(t, j.Close())
			j, err = boltjournal.Open(j.Path(), &opts.Journal)
			require.NoError(t, err)
			t.Cleanup(func() { j.Close() })
			tr, _ = transportOn(t, j, opts, rt, clk.Now())
			rec, err = j.Lookup("order-r1")
			require.NoError(t, err)
			require.Equal(t, StateSettled, rec.State)
			require.Nil(t, rec.Header)
			require.Equal(t, "application/json", rec.ContentType)
			refused("text/plain", "")
			refused("application/json", "br")
			resp, err = call("application/json", "")
			require.NoError(t, err)
			require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), "a repeat still replays")
			drain(t, resp)
			require.NoError(t, pay.Ledger().Check([]string{"order-r1"}))
		})
	}
}

// Codings and media types are normalized as RFC 9110 says they compare.
func TestRepresentationNormalized(t *testing.T) {
	tr, _ := memTransport(t, &Options{SensitiveHeaders: []string{"Content-Encoding"}})
	for _, c := range []struct {
		h      http.Header
		ct, ce string
	}{
		{http.Header{}, "", ""},
		{http.Header{"Content-Type": {"Text/Plain; Charset=utf-8"}}, "text/plain; charset=utf-8", ""},
		{http.Header{"Content-Type": {`application/json;b=2; a="1"`}}, "application/json; a=1; b=2", ""},
		{http.Header{"Content-Type": {"not a / type;;"}}, "not a / type;;", ""},
		{http.Header{"content-type": {"a/b"}}, "a/b", ""},
		// Content-Encoding is sensitive here: never journaled, not compared.
		{http.Header{"Content-Encoding": {"GZIP, br"}}, "", ""},
	} {
		ct, ce := tr.representation(c.h)
		require.Equal(t, c.ct, ct, "%v", c.h)
		require.Equal(t, c.ce, ce, "%v", c.h)
	}
	tr, _ = memTransport(t, nil)
	_, ce := tr.representation(http.Header{"Content-Encoding": {"GZIP, br", " deflate"}})
	require.Equal(t, "gzip,br,deflate", ce)
}
