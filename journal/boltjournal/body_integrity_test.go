// The journal checks the body a pending record is resumed with against the
// record's BodySHA256: a sealed record's key ID is itself unauthenticated, so a
// lost body entry, or a record whose "kid" and "sealed" fields are gone, would
// otherwise be resumed with the wrong bytes under the operation's real key. Such
// a record is refused (journal.ErrCorrupt): nothing is sent and it stays pending.
// This is the journal's side: every read a resume sends from refuses it. That a
// Transport's Resume then sends nothing is tested in integrity_test.go.

package boltjournal

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestReviewLoadChecksBodyIntegrity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sealed bool
		change func(t *testing.T, tx *bolt.Tx, id []byte)
	}{
		{"sealed record, body entry lost", true, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, setStoredBodyTx(tx, id, nil))
		}},
		{"sealed record, kid and sealed part stripped", true, func(t *testing.T, tx *bolt.Tx, id []byte) {
			editMeta(t, tx, id, func(m map[string]any) { delete(m, "kid"); delete(m, "sealed") })
		}},
		{"plaintext record, body entry lost", false, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, setStoredBodyTx(tx, id, nil))
		}},
		{"plaintext record, body altered", false, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, setStoredBodyTx(tx, id, []byte(`{"amount":999999,"currency":"eur","reference":"x"}`)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "sealed.journal")
			opts := &Options{}
			if tc.sealed {
				opts.Encryption = &Keyring{Current: "k", Keys: map[string][]byte{"k": newKey32(t)}}
			}
			j, err := Open(path, opts)
			require.NoError(t, err)
			rec := &Record{Key: "key-t1", OperationID: "t1", Method: http.MethodPost,
				URL: "http://127.0.0.1/payments", Header: http.Header{"X-Trace": {"trace-t1"}},
				Body:  fmt.Appendf(nil, `{"amount":700,"currency":"eur","reference":%q}`, "t1-4111111111111111"),
				State: StatePending}
			require.NoError(t, j.insert(rec, false))
			require.NoError(t, j.Close())
			tamper(t, path, "t1", func(tx *bolt.Tx, id []byte) { tc.change(t, tx, id) })

			j, err = Open(path, opts)
			require.NoError(t, err)
			t.Cleanup(func() { j.Close() })
			ctx := context.Background()
			// As a resume reads it: listed without its body, then reloaded
			// with it just before it is sent.
			var listed []*Record
			for r, err := range j.Pending(ctx, 0) {
				require.NoError(t, err)
				listed = append(listed, r)
			}
			require.Len(t, listed, 1)
			_, err = j.Reload(ctx, listed[0])
			require.ErrorIs(t, err, journal.ErrCorrupt, "a body that does not match its hash is a clear error")
			_, err = j.Lookup("t1")
			require.ErrorIs(t, err, journal.ErrCorrupt, "a body that does not match its hash is a clear error")
			recs, err := j.Records()
			require.NoError(t, err)
			require.Equal(t, StatePending, recs[0].State, "it stays pending")
		})
	}
}
