package boltjournal

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The identity key is the journal's own: 32 bytes in its meta bucket, the
// same after a reopen, with encryption at rest or without.
func TestIdentityKeyKeptInFile(t *testing.T) {
	for _, kr := range []*Keyring{nil, {Current: "k1", Keys: map[string][]byte{"k1": newKey32(t)}}} {
		j, path := testJournal(t)
		if kr != nil {
			require.NoError(t, j.Close())
			var err error
			j, err = Open(path, &Options{Encryption: kr})
			require.NoError(t, err)
		}
		key := j.IdentityKey()
		require.NoError(t, j.Close())
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		require.NoError(t, err)
		require.NoError(t, db.View(func(tx *bolt.Tx) error {
			require.Len(t, tx.Bucket(bucketMeta).Get(metaIdentityKey), identityKeySize)
			require.Equal(t, key, tx.Bucket(bucketMeta).Get(metaIdentityKey))
			return nil
		}))
		require.NoError(t, db.Close())
	}
}
