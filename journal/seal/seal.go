// Package seal is encryption at rest for idem's journals: the Keyring a
// caller gives a Store (boltjournal.Options.Encryption,
// pgjournal.Options.Encryption), and the one rule both Stores follow for
// what of a journal.Record they seal under it and how (record.go). A Store
// of your own may seal by it too.
//
// This file holds the Keyring, the Ring built from it, and the sealing of
// byte strings with AES-256-GCM.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"maps"
	"slices"

	"github.com/idem-go/idem/journal"
)

// KeySize is the length, in bytes, of every key in a Keyring: AES-256.
const KeySize = 32

// Keyring holds the keys that seal what a journal stores of each request:
// its body, its headers (sensitive ones are never stored at all), its URL's
// query, the body's SHA-256 and the operation's identity binding (record.go
// lists them). Each record is sealed with AES-256-GCM (a fresh random
// 96-bit nonce per write) under one key and names that key's ID, in
// plaintext, so that keys can be rotated: add a new key, make it Current,
// and keep the old one for as long as records sealed under it may be read
// (pending ones until they finish; finished ones for the journal's
// Retention). A record keeps the key it was first sealed under for life. A
// record whose key ID is missing from the Keyring cannot be read
// (journal.ErrUnknownEncryptionKey) and is never sent; it stays pending.
//
// A Store copies the keys when it is opened; changing a Keyring afterwards
// has no effect. A Keyring is a plain value, not safe for concurrent
// modification.
type Keyring struct {
	// Current is the ID of the key that new records are sealed under. It must
	// be in Keys.
	Current string

	// Keys maps a key ID (1 to 255 visible ASCII characters, stored in
	// plaintext in every record sealed under it) to its KeySize-byte key.
	Keys map[string][]byte
}

// Validate reports what NewRing would refuse in k, with an error matching
// journal.ErrInvalidOptions; nil for a nil Keyring.
func (k *Keyring) Validate() error {
	_, err := NewRing(k)
	return err
}

// Ring is a validated Keyring: one AEAD per key ID, the keys copied. A nil
// *Ring seals nothing and opens nothing (journal.ErrUnknownEncryptionKey).
// It is safe for concurrent use.
type Ring struct {
	current string
	aeads   map[string]cipher.AEAD
}

// boxVersion is the first byte of every sealed string: the format of what
// follows (the nonce, then the GCM ciphertext and tag).
const boxVersion = 1

// NewRing validates k and makes its ciphers; a nil k gives a nil Ring. An
// invalid k fails with an error matching journal.ErrInvalidOptions that
// names the field ("Encryption") and the key ID.
func NewRing(k *Keyring) (*Ring, error) {
	if k == nil {
		return nil, nil
	}
	if k.Keys[k.Current] == nil {
		return nil, fmt.Errorf("%w: Encryption: Current key ID %q is not in Keys", journal.ErrInvalidOptions, k.Current)
	}
	r := &Ring{current: k.Current, aeads: make(map[string]cipher.AEAD, len(k.Keys))}
	for _, id := range slices.Sorted(maps.Keys(k.Keys)) { // the same error for the same Keyring
		if !validKeyID(id) {
			return nil, fmt.Errorf("%w: Encryption: key ID %q: want 1 to 255 visible ASCII characters", journal.ErrInvalidOptions, id)
		}
		key := k.Keys[id]
		if len(key) != KeySize {
			return nil, fmt.Errorf("%w: Encryption: key %q is %d bytes, want %d (AES-256)", journal.ErrInvalidOptions, id, len(key), KeySize)
		}
		block, err := aes.NewCipher(key) // copies the key: later changes to Keys do nothing
		if err != nil {
			return nil, fmt.Errorf("%w: Encryption: key %q: %w", journal.ErrInvalidOptions, id, err)
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("%w: Encryption: key %q: %w", journal.ErrInvalidOptions, id, err)
		}
		r.aeads[id] = aead
	}
	return r, nil
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

// Current is the key ID new records are sealed under, "" for a nil Ring:
// what a Store sets a new record's EncryptionKeyID to.
func (r *Ring) Current() string {
	if r == nil {
		return ""
	}
	return r.current
}

// Covers reports whether r seals under o's current key and opens all of o's
// key IDs: whether records meant to be sealed under o are, through a Store
// holding r. A nil o is covered by anything.
func (r *Ring) Covers(o *Ring) bool {
	if o == nil {
		return true
	}
	if r == nil || r.current != o.current {
		return false
	}
	for id := range o.aeads {
		if r.aeads[id] == nil {
			return false
		}
	}
	return true
}

// aead returns the cipher of key id, or an error matching journal.ErrUnknownEncryptionKey.
func (r *Ring) aead(id string) (cipher.AEAD, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: sealed under key %q, and no Options.Encryption was given", journal.ErrUnknownEncryptionKey, id)
	}
	a := r.aeads[id]
	if a == nil {
		return nil, fmt.Errorf("%w: sealed under key %q, which Options.Encryption.Keys lacks", journal.ErrUnknownEncryptionKey, id)
	}
	return a, nil
}

// sealTo appends plain, sealed under key id and bound to ad (GCM
// additional data), to dst, which must not overlap plain.
func (r *Ring) sealTo(dst []byte, id string, plain, ad []byte) ([]byte, error) {
	a, err := r.aead(id)
	if err != nil {
		return nil, err
	}
	return a.Seal(append(dst, boxVersion), nil, plain, ad), nil
}

// openTo appends what sealTo sealed to dst, which must not overlap box,
// checking it was sealed under key id with the same ad. A wrong key, ad or
// altered byte gives an error matching journal.ErrDecrypt; a key the Ring
// lacks, journal.ErrUnknownEncryptionKey.
func (r *Ring) openTo(dst []byte, id string, box, ad []byte) ([]byte, error) {
	a, err := r.aead(id)
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
