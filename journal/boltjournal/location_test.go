package boltjournal

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLocationSealed: a moved record's Location is journaled as its URL is:
// with Options.Encryption its query is sealed, and it reads back the same.
func TestLocationSealed(t *testing.T) {
	k := fuzzKeyring(t)
	for _, r := range fuzzSeeds() {
		r.Location = "https://api.test/v2/payments?mode=live&region=eu"
		meta, err := k.encodeMeta(r)
		require.NoError(t, err)
		body, err := k.encodeBody(r)
		require.NoError(t, err)
		got, sealErr, err := k.decodeStored(meta, body)
		require.NoError(t, err)
		require.NoError(t, sealErr)
		requireSameRecord(t, r, got)
		if r.EncryptionKeyID != "" {
			require.NotContains(t, string(meta), "region=eu")
			require.Contains(t, string(meta), "https://api.test/v2/payments")
		}
	}
}
