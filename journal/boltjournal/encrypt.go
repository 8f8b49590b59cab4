// This file holds Keyring, the caller's AES-256 keys for encryption at rest
// (Options.Encryption), and the sealing of byte strings under them with
// AES-256-GCM. record_seal.go says which parts of a record are sealed.

package boltjournal

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/idem-go/idem/journal"
)

// EncryptionKeySize is the length, in bytes, of every key in a Keyring: AES-256.
const EncryptionKeySize = 32

// Keyring holds the keys that seal what the journal stores of each request:
// its body, its headers (sensitive ones are never stored at all), its URL's
// query, and the body's SHA-256. Each record is sealed with
// AES-256-GCM (a fresh random 96-bit nonce per write) under one key and names
// that key's ID, in plaintext, so that keys can be rotated: add a new key,
// make it Current, and keep the old one for as long as records sealed under
// it may be read (pending ones until they finish; finished ones for
// Options.Retention). A record whose key ID is missing from the Keyring
// cannot be read (journal.ErrUnknownEncryptionKey) and is never sent; it stays pending.
//
// idem copies the keys when the Journal is opened; changing a Keyring
// afterwards has no effect. A Keyring is a plain value, not safe for
// concurrent modification.
type Keyring struct {
	// Current is the ID of the key that new records are sealed under. It must
	// be in Keys.
	Current string

	// Keys maps a key ID (1 to 255 visible ASCII characters, stored in
	// plaintext in every record sealed under it) to its EncryptionKeySize-byte key.
	Keys map[string][]byte
}

// keyring is a validated Keyring: one AEAD per key ID. A nil *keyring seals
// nothing and opens nothing. It is safe for concurrent use.
type keyring struct {
	current string
	aeads   map[string]cipher.AEAD
}

// boxVersion is the first byte of every sealed string: the format of what
// follows (the nonce, then the GCM ciphertext and tag).
const boxVersion = 1

// build validates the Keyring and makes its ciphers; nil gives nil.
func (k *Keyring) build() (*keyring, error) {
	if k == nil {
		return nil, nil
	}
	if k.Keys[k.Current] == nil {
		return nil, fmt.Errorf("%w: Encryption: Current key ID %q is not in Keys", journal.ErrInvalidOptions, k.Current)
	}
	kr := &keyring{current: k.Current, aeads: make(map[string]cipher.AEAD, len(k.Keys))}
	for _, id := range slices.Sorted(maps.Keys(k.Keys)) { // the same error for the same Keyring
		if !validKeyID(id) {
			return nil, fmt.Errorf("%w: Encryption: key ID %q: want 1 to 255 visible ASCII characters", journal.ErrInvalidOptions, id)
		}
		key := k.Keys[id]
		if len(key) != EncryptionKeySize {
			return nil, fmt.Errorf("%w: Encryption: key %q is %d bytes, want %d (AES-256)", journal.ErrInvalidOptions, id, len(key), EncryptionKeySize)
		}
		block, err := aes.NewCipher(key) // copies the key: later changes to Keys do nothing
		if err != nil {
			return nil, fmt.Errorf("%w: Encryption: key %q: %w", journal.ErrInvalidOptions, id, err)
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("%w: Encryption: key %q: %w", journal.ErrInvalidOptions, id, err)
		}
		kr.aeads[id] = aead
	}
	return kr, nil
}

func validKeyID(id string) bool {
	if id == "" || len(id) > 255 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// currentID is the key ID new records are sealed under, "" for none.
func (k *keyring) currentID() string {
	if k == nil {
		return ""
	}
	return k.current
}

// covers reports whether k seals under o's current key and opens all of o's
// key IDs: whether a Transport given o may write through a journal opened
// with k. A nil o is covered by anything.
func (k *keyring) covers(o *keyring) bool {
	if o == nil {
		return true
	}
	if k == nil || k.current != o.current {
		return false
	}
	for id := range o.aeads {
		if k.aeads[id] == nil {
			return false
		}
	}
	return true
}

// aead returns the cipher of key id, or an error matching journal.ErrUnknownEncryptionKey.
func (k *keyring) aead(id string) (cipher.AEAD, error) {
	if k == nil {
		return nil, fmt.Errorf("%w: sealed under key %q, and no Options.Encryption was given", journal.ErrUnknownEncryptionKey, id)
	}
	a := k.aeads[id]
	if a == nil {
		return nil, fmt.Errorf("%w: sealed under key %q, which Options.Encryption.Keys lacks", journal.ErrUnknownEncryptionKey, id)
	}
	return a, nil
}

// seal encrypts plain under key id, bound to ad (GCM additional data).
func (k *keyring) seal(id string, plain, ad []byte) ([]byte, error) {
	return k.sealTo(nil, id, plain, ad)
}

// sealTo is seal appending to dst, which must not overlap plain.
func (k *keyring) sealTo(dst []byte, id string, plain, ad []byte) ([]byte, error) {
	a, err := k.aead(id)
	if err != nil {
		return nil, err
	}
	return a.Seal(append(dst, boxVersion), nil, plain, ad), nil
}

// open decrypts what seal returned, checking it was sealed under key id with
// the same ad. A wrong key, ad or altered byte gives an error matching
// journal.ErrDecrypt; a key the keyring lacks, journal.ErrUnknownEncryptionKey.
func (k *keyring) open(id string, box, ad []byte) ([]byte, error) {
	return k.openTo(nil, id, box, ad)
}

// openTo is open appending to dst, which must not overlap box.
func (k *keyring) openTo(dst []byte, id string, box, ad []byte) ([]byte, error) {
	a, err := k.aead(id)
	if err != nil {
		return nil, err
	}
	if len(box) < 1+a.Overhead() || box[0] != boxVersion {
		return nil, fmt.Errorf("%w: sealed data under key %q is malformed", journal.ErrDecrypt, id)
	}
	plain, err := a.Open(dst, nil, box[1:], ad)
	if err != nil {
		return nil, fmt.Errorf("%w: under key %q: %w", journal.ErrDecrypt, id, err)
	}
	return plain, nil
}

// additionalData binds a sealed string to one part of one record: the
// fields that say where and as what its request is sent. A body moved to
// another record (another idempotency key, method, host or path) no longer
// opens, so an altered file cannot make idem send one operation's sealed
// bytes under another's key.
func additionalData(part string, r *Record, plainURL string) []byte {
	b := []byte("idem-record\x00")
	for _, s := range []string{part, r.EncryptionKeyID, r.Key, r.OperationID, r.Method, plainURL, r.Host} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// Validate reports what Open would refuse in k, with an error matching
// journal.ErrInvalidOptions; nil for a nil Keyring.
func (k *Keyring) Validate() error {
	_, err := k.build()
	return err
}

// Covers reports whether j seals under k's Current key and opens all of k's
// key IDs: whether records meant to be sealed under k are, through j. A nil
// k is covered by any journal; an invalid one by none.
func (j *Journal) Covers(k *Keyring) bool {
	o, err := k.build()
	return err == nil && j.keyring.covers(o)
}
