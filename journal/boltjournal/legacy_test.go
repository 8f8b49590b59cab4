// Tests that records an idem before identities and representations wrote
// (journal version 5, record_parse.go) keep working through an idem
// Transport: any identity may continue them, and their representation is
// read from their Header while they have one.

package boltjournal_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The credentials of two tenants of one service.
const (
	tokenAcme   = "Bearer acme_tok_3f9a1c"
	tokenGlobex = "Bearer globex_tok_c41d0e"
)

// typedPayment is POST {base}/payments for operation op with acme's token,
// a Content-Type and a Content-Encoding ("" for none).
func typedPayment(tb testing.TB, base, op, contentType, contentEncoding string) *http.Request {
	tb.Helper()
	req := newRequest(tb, http.MethodPost, base+"/payments", paymentBody(op, 4200))
	req = req.WithContext(idem.WithOperationID(context.Background(), op))
	req.Header.Set("Authorization", tokenAcme)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if contentEncoding != "" {
		req.Header.Set("Content-Encoding", contentEncoding)
	}
	return req
}

// requireNothingSent asserts the server got no request since it had got n.
func requireNothingSent(tb testing.TB, pay *testserver.Server, n int) {
	tb.Helper()
	require.Equal(tb, n, pay.Ledger().Requests, "nothing may be sent")
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
			id := tx.Bucket(boltjournal.BucketIndex).Get([]byte("o\x00" + op))
			require.NotNil(tb, id, op)
			b := tx.Bucket(boltjournal.BucketPending)
			if b.Get(id) == nil {
				b = tx.Bucket(boltjournal.BucketDone)
			}
			rec, err := boltjournal.DecodePlain(b.Get(id))
			require.NoError(tb, err)
			require.True(tb, rec.Identity != "" || rec.CredentialTag != "")
			rec.Identity, rec.CredentialTag, rec.ContentType, rec.ContentEncoding = "", "", "", ""
			meta, err := boltjournal.EncodeMeta(rec)
			require.NoError(tb, err)
			body := boltjournal.StoredBody(tx, id) // kept in the bodies bucket, as then
			require.NoError(tb, b.Put(id, meta))
			if body != nil {
				require.NoError(tb, tx.Bucket(boltjournal.BucketBodies).Put(id, body))
			}
		}
		meta := tx.Bucket(boltjournal.BucketMeta)
		require.NoError(tb, meta.Delete(boltjournal.MetaIdentityKey))
		return meta.Put(boltjournal.MetaVersion, []byte("idem-journal-5"))
	}))
}

// A record written before operations were bound to identities keeps working
// as it did: any identity may continue it (it names none), and its
// representation is read from its Header while it has one; a settled one
// has none left, and matches any.
func TestIdentityLegacyRecords(t *testing.T) {
	t.Parallel()
	pay := startPayments(t, nil)
	base := pay.URL
	path := filepath.Join(t.TempDir(), "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	opts := &idem.Options{MaxAttempts: 1, Backoff: dueSoon, Base: pay.Client().Transport}
	tr, err := idem.NewTransport(j, opts)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(typedPayment(t, base, "old-settled", "application/json", ""))
	require.NoError(t, err)
	drain(t, resp)
	pay.Script(testserver.Fault{Kind: testserver.FaultStatus})
	_, err = tr.RoundTrip(typedPayment(t, base, "old-pending", "application/json", ""))
	waitDue(t, pendingErr(t, err).NextAttempt)
	require.NoError(t, j.Close())
	unbind(t, path, "old-settled", "old-pending")

	j, err = boltjournal.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	require.NoError(t, j.DB().View(func(tx *bolt.Tx) error {
		require.Equal(t, "idem-journal-10", string(tx.Bucket(boltjournal.BucketMeta).Get(boltjournal.MetaVersion)), "marked on open")
		require.Len(t, tx.Bucket(boltjournal.BucketMeta).Get(boltjournal.MetaIdentityKey), boltjournal.IdentityKeySize, "and given a key")
		return nil
	}))
	tr, err = idem.NewTransport(j, opts)
	require.NoError(t, err)

	// Pending: the representation comes from its Header.
	sent := pay.Ledger().Requests
	_, err = tr.RoundTrip(typedPayment(t, base, "old-pending", "text/plain", ""))
	require.ErrorIs(t, err, idem.ErrKeyReuse)
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
