// Tests that an operation's representation headers (Content-Type,
// Content-Encoding) are part of its fingerprint, while pending and once
// settled (its Header dropped), plaintext and sealed, across a restart; and
// how records written before identities and representations were kept
// compare.

package idem

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/testhook"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
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

// unbind rewrites the record of op as an idem before identities were bound
// wrote it (no identity, tag or representation fields), and marks the
// journal at path with that idem's version.
func unbind(tb testing.TB, path string, ops ...string) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(tb, err)
	defer db.Close()
	require.NoError(tb, db.Update(func(tx *bolt.Tx) error {
		for _, op := range ops {
			id := tx.Bucket(bucketIndex).Get([]byte("o\x00" + op))
			require.NotNil(tb, id, op)
			b := tx.Bucket(bucketPending)
			if b.Get(id) == nil {
				b = tx.Bucket(bucketDone)
			}
			rec, err := decodePlain(b.Get(id))
			require.NoError(tb, err)
			require.True(tb, rec.Identity != "" || rec.CredentialTag != "")
			rec.Identity, rec.CredentialTag, rec.ContentType, rec.ContentEncoding = "", "", "", ""
			meta, err := encodeMeta(rec)
			require.NoError(tb, err)
			body := testhook.StoredBody(tx, id) // kept in the bodies bucket, as then
			require.NoError(tb, b.Put(id, meta))
			if body != nil {
				require.NoError(tb, tx.Bucket(bucketBodies).Put(id, body))
			}
		}
		meta := tx.Bucket(bucketMeta)
		require.NoError(tb, meta.Delete(metaIdentityKey))
		return meta.Put(metaVersion, []byte("idem-journal-5"))
	}))
}

// A record written before operations were bound to identities keeps working
// as it did: any identity may continue it (it names none), and its
// representation is read from its Header while it has one; a settled one
// has none left, and matches any.
func TestIdentityLegacyRecords(t *testing.T) {
	t.Parallel()
	pay, base, rt := paymentsOver(t, false)
	j, path := testJournal(t)
	tr, clk := transportOn(t, j, Options{MaxAttempts: 1}, rt, time.Time{})
	resp, err := tr.RoundTrip(typedPayment(t, base, "old-settled", "application/json", ""))
	require.NoError(t, err)
	drain(t, resp)
	pay.Script(testserver.Fault{Kind: testserver.FaultStatus})
	_, err = tr.RoundTrip(typedPayment(t, base, "old-pending", "application/json", ""))
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
	require.NoError(t, j.Close())
	unbind(t, path, "old-settled", "old-pending")

	j, err = boltjournal.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	require.NoError(t, boltDB(j).View(func(tx *bolt.Tx) error {
		require.Equal(t, "idem-journal-10", string(tx.Bucket(bucketMeta).Get(metaVersion)), "marked on open")
		require.Len(t, tx.Bucket(bucketMeta).Get(metaIdentityKey), identityKeySize, "and given a key")
		return nil
	}))
	tr, _ = transportOn(t, j, Options{MaxAttempts: 1}, rt, clk.Now())

	// Pending: the representation comes from its Header.
	sent := pay.Ledger().Requests
	_, err = tr.RoundTrip(typedPayment(t, base, "old-pending", "text/plain", ""))
	require.ErrorIs(t, err, ErrKeyReuse)
	requireNothingSent(t, pay, sent)
	// Settled: unknown, so any matches, as before.
	req := typedPayment(t, base, "old-settled", "text/plain", "")
	req.Header.Set("Authorization", tokenGlobex)
	resp, err = tr.RoundTrip(req)
	require.NoError(t, err, "bound to no identity, any continues it")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	drain(t, resp)
	// Unbound, the pending one is anyone's too.
	req = typedPayment(t, base, "old-pending", "application/json", "")
	req.Header.Set("Authorization", tokenGlobex)
	resp, err = tr.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	drain(t, resp)
	rec, err := j.Lookup("old-pending")
	require.NoError(t, err)
	require.Empty(t, rec.Identity+rec.CredentialTag, "a call does not bind another's operation")
}
