// This file holds the journal's identity key: the HMAC key under which an
// operation created with no declared identity is bound to its creator's
// credentials (identity.go) without the credentials being written down.
//
// The key is 32 random bytes (crypto/rand), made when a writer first opens
// the journal and kept in its meta bucket, so a tag made before a restart
// compares equal after it. What that buys: the file holds no credential, and
// a tag tells nothing on its own of the secret behind it, nor links the same
// credential across two journals. What it does not: the key sits in the same
// file, so someone holding a copy of a plaintext journal can test guesses at
// a credential offline; a high-entropy token (a random API key, an OAuth
// access token) stays out of reach, a short password does not. Under
// Options.Encryption each record's tag is sealed with the rest of its request
// (record_seal.go): without the Keyring there is no tag to test guesses
// against.

package boltjournal

import (
	"bytes"
	"crypto/rand"
	"fmt"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
)

// identityKeySize is the HMAC key's length: SHA-256's block is 64 bytes,
// and 32 random bytes are as strong as the hash.
const identityKeySize = 32

// metaIdentityKey names the key in the meta bucket.
var metaIdentityKey = []byte("identity-key")

// loadIdentityKey reads the journal's identity key from its meta bucket, and
// creates it in a journal opened for writing that has none (new, or written
// by an idem before identities were bound).
func (j *Journal) loadIdentityKey(meta *bolt.Bucket) error {
	k := meta.Get(metaIdentityKey)
	switch {
	case len(k) == identityKeySize:
		j.identityKey = bytes.Clone(k) // bbolt's memory is the transaction's
		return nil
	case k != nil:
		return fmt.Errorf("%w: %s: identity key of %d bytes", journal.ErrCorrupt, j.path, len(k))
	case j.readOnly:
		return nil
	}
	k = make([]byte, identityKeySize)
	if _, err := rand.Read(k); err != nil {
		return fmt.Errorf("idem: journal %s: identity key: %w", j.path, err)
	}
	j.identityKey = k
	return meta.Put(metaIdentityKey, k)
}
