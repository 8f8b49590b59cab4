// Tests that a resumed body is checked against its record's BodySHA256
// (body.go, record_seal.go) through an idem Transport: the journal's side
// is body_integrity_test.go.

package boltjournal_test

import (
	"testing"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The journal checks the body a pending record is resumed with against the
// record's BodySHA256: a sealed record's key ID is itself unauthenticated, so a
// lost body entry, or a record whose "kid" and "sealed" fields are gone, would
// otherwise be resumed with the wrong bytes under the operation's real key. Such
// a record is refused (journal.ErrCorrupt): nothing is sent and it stays pending.
func TestReviewResumeChecksBodyIntegrity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sealed bool
		change func(t *testing.T, tx *bolt.Tx, id []byte)
	}{
		{"sealed record, body entry lost", true, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, boltjournal.SetStoredBody(tx, id, nil))
		}},
		{"sealed record, kid and sealed part stripped", true, func(t *testing.T, tx *bolt.Tx, id []byte) {
			boltjournal.EditMeta(t, tx, id, func(m map[string]any) { delete(m, "kid"); delete(m, "sealed") })
		}},
		{"plaintext record, body entry lost", false, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, boltjournal.SetStoredBody(tx, id, nil))
		}},
		{"plaintext record, body altered", false, func(t *testing.T, tx *bolt.Tx, id []byte) {
			require.NoError(t, boltjournal.SetStoredBody(tx, id, []byte(`{"amount":999999,"currency":"eur","reference":"x"}`)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSealedFixture(t)
			var kr *boltjournal.Keyring
			if tc.sealed {
				kr = &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": newKey32(t)}}
			}
			j, tr := f.open(t, kr)
			body := f.leavePending(t, tr, "t1")
			require.NoError(t, j.Close())
			boltjournal.Tamper(t, f.path, "t1", func(tx *bolt.Tx, id []byte) { tc.change(t, tx, id) })

			f.srv.failing.Store(false)
			sent := len(f.srv.requests())
			j, tr = f.open(t, kr)
			outs := outcomesByOp(t, j, tr)
			o := outs["t1"]
			if o.Response != nil {
				got := f.srv.requests()
				t.Errorf("resumed with body %q (journaled: %q), status %d", got[len(got)-1].Body, body, o.Response.StatusCode)
			}
			require.ErrorIs(t, o.Err, journal.ErrCorrupt, "a body that does not match its hash is a clear error")
			require.Len(t, f.srv.requests(), sent, "nothing sent")
			recs, err := j.Records()
			require.NoError(t, err)
			require.Equal(t, idem.StatePending, recs[0].State, "it stays pending")
		})
	}
}
