// Tests of sealed records (encrypt.go, record_seal.go) through an idem
// Transport: encryption turned on over a plaintext journal, and records
// tampered with in the closed file, which are refused and never sent.

package boltjournal_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestEncryptionTurnedOnLater(t *testing.T) {
	f := newSealedFixture(t)
	kr := &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": newKey32(t)}}

	j, tr := f.open(t, nil)
	plainBody := f.leavePending(t, tr, "before")
	require.NoError(t, j.Close())
	require.Equal(t, "idem-journal-10", boltjournal.JournalVersion(t, f.path), "no encryption, no new version")

	j, tr = f.open(t, kr)
	f.leavePending(t, tr, "after")
	require.Equal(t, map[string]string{"before": "", "after": "k"}, keyIDs(t, j))
	rec, err := j.Lookup("before")
	require.NoError(t, err)
	require.Equal(t, plainBody, string(rec.Body))
	require.NoError(t, j.Close())
	require.Equal(t, "idem-journal-11", boltjournal.JournalVersion(t, f.path),
		"marked, so that an idem without sealed records refuses the file")

	// Read-only, without keys: listed, the sealed one as such.
	ro, err := boltjournal.OpenReadOnly(f.path, 0)
	require.NoError(t, err)
	recs, err := ro.Records()
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.False(t, recs[0].Sealed)
	require.True(t, recs[1].Sealed)
	require.Equal(t, "k", recs[1].EncryptionKeyID)
	require.Equal(t, f.srv.URL+"/payments", recs[1].URL, "scheme, host and path stay readable")
	require.NoError(t, ro.Close())

	f.srv.failing.Store(false)
	j, tr = f.open(t, kr)
	outs := outcomesByOp(t, j, tr)
	require.Len(t, outs, 2)
	for op, o := range outs {
		require.NoError(t, o.Err, op)
		require.Equal(t, http.StatusCreated, o.Response.StatusCode, op)
	}
}

func TestSealedRecordTampered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, tx *bolt.Tx, id1, id2 []byte)
	}{
		{"body byte flipped", func(t *testing.T, tx *bolt.Tx, id1, _ []byte) {
			require.NoError(t, boltjournal.SetStoredBody(tx, id1, boltjournal.FlipLast(boltjournal.StoredBody(tx, id1))))
		}},
		{"body truncated", func(t *testing.T, tx *bolt.Tx, id1, _ []byte) {
			require.NoError(t, boltjournal.SetStoredBody(tx, id1, []byte{1, 2, 3}))
		}},
		{"bodies swapped", func(t *testing.T, tx *bolt.Tx, id1, id2 []byte) {
			b1, b2 := boltjournal.StoredBody(tx, id1), boltjournal.StoredBody(tx, id2)
			require.NoError(t, boltjournal.SetStoredBody(tx, id1, b2))
			require.NoError(t, boltjournal.SetStoredBody(tx, id2, b1))
		}},
		{"sealed part flipped", func(t *testing.T, tx *bolt.Tx, id1, _ []byte) {
			boltjournal.EditMeta(t, tx, id1, func(m map[string]any) {
				box, err := base64.StdEncoding.DecodeString(m["sealed"].(string))
				require.NoError(t, err)
				box[len(box)/2] ^= 0x01
				m["sealed"] = box
			})
		}},
		{"path retargeted", func(t *testing.T, tx *bolt.Tx, id1, _ []byte) {
			boltjournal.EditMeta(t, tx, id1, func(m map[string]any) {
				m["url"] = strings.Replace(m["url"].(string), "/payments", "/refunds", 1)
			})
		}},
		{"key changed", func(t *testing.T, tx *bolt.Tx, id1, _ []byte) {
			boltjournal.EditMeta(t, tx, id1, func(m map[string]any) { m["key"] = "another-key" })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSealedFixture(t)
			kr := &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": newKey32(t)}}
			j, tr := f.open(t, kr)
			f.leavePending(t, tr, "t1")
			f.leavePending(t, tr, "t2")
			require.NoError(t, j.Close())
			boltjournal.Tamper(t, f.path, "t1", func(tx *bolt.Tx, id1 []byte) {
				id2 := tx.Bucket(boltjournal.BucketIndex).Get([]byte("o\x00t2"))
				tc.change(t, tx, id1, bytes.Clone(id2))
			})

			f.srv.failing.Store(false)
			sent := len(f.srv.requests())
			j, tr = f.open(t, kr)
			_, err := j.Lookup("t1")
			require.ErrorIs(t, err, journal.ErrDecrypt)
			outs := outcomesByOp(t, j, tr)
			require.ErrorIs(t, outs["t1"].Err, journal.ErrDecrypt)
			require.NotErrorIs(t, outs["t1"].Err, journal.ErrUnknownEncryptionKey)
			wantSent := 1
			if tc.name == "bodies swapped" {
				require.ErrorIs(t, outs["t2"].Err, journal.ErrDecrypt, "a body moved between records does not open")
				wantSent = 0
			} else {
				require.NoError(t, outs["t2"].Err)
			}
			require.Len(t, f.srv.requests(), sent+wantSent, "nothing tampered is sent")
			recs, err := j.Records()
			require.NoError(t, err)
			require.Equal(t, idem.StatePending, recs[0].State, "it stays pending")
			require.True(t, recs[0].Sealed)
		})
	}
}

func TestSealedRecordWithPlaintextRequestIsCorrupt(t *testing.T) {
	// Headers added in plaintext beside a sealed part would be sent
	// unauthenticated: such a record is not one idem wrote.
	f := newSealedFixture(t)
	kr := &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": newKey32(t)}}
	j, tr := f.open(t, kr)
	f.leavePending(t, tr, "t1")
	require.NoError(t, j.Close())
	boltjournal.Tamper(t, f.path, "t1", func(tx *bolt.Tx, id []byte) {
		boltjournal.EditMeta(t, tx, id, func(m map[string]any) {
			m["header"] = map[string]any{"X-Injected": []string{"1"}}
		})
	})
	j, _ = f.open(t, kr)
	_, err := j.Lookup("t1")
	require.ErrorIs(t, err, journal.ErrCorrupt)
}

// A binding written in plaintext beside a sealed part is not one idem
// wrote: it would rebind the operation unauthenticated.
func TestSealedRecordWithPlaintextBindingIsCorrupt(t *testing.T) {
	t.Parallel()
	for _, field := range []string{"identity", "cred", "content_type", "content_encoding"} {
		t.Run(field, func(t *testing.T) {
			f := newSealedFixture(t)
			kr := &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": newKey32(t)}}
			j, tr := f.open(t, kr)
			f.leavePending(t, tr, "t1")
			rec, err := j.Lookup("t1")
			require.NoError(t, err)
			require.NotEmpty(t, rec.CredentialTag, "sealed, and opened")
			require.NoError(t, j.Close())
			boltjournal.Tamper(t, f.path, "t1", func(tx *bolt.Tx, id []byte) {
				boltjournal.EditMeta(t, tx, id, func(m map[string]any) { m[field] = "x" })
			})
			j, _ = f.open(t, kr)
			_, err = j.Lookup("t1")
			require.ErrorIs(t, err, journal.ErrCorrupt)
		})
	}
}
