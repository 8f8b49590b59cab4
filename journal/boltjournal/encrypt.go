// This file holds the bbolt journal's names for encryption at rest
// (Options.Encryption): the Keyring, whose rules are package seal's, and
// Covers. record_seal.go says how a sealed record is stored.

package boltjournal

import "github.com/idem-go/idem/journal/seal"

// KeySize is the length, in bytes, of every key in a Keyring: AES-256 (seal.KeySize).
const KeySize = seal.KeySize

// Keyring holds the keys that seal what the journal stores of each request
// (Options.Encryption): seal.Keyring, the type every idem journal takes.
// It says what is sealed, how keys rotate, and what a record whose key is
// missing does (journal.ErrUnknownEncryptionKey: it is never sent, and
// stays pending).
type Keyring = seal.Keyring

// keyring is the Journal's seal.Ring, with the methods that store records
// sealed under it in the bbolt journal's form (record_seal.go). A nil
// *keyring seals nothing and opens nothing.
type keyring seal.Ring

// ring is k as the seal.Ring it is.
func (k *keyring) ring() *seal.Ring { return (*seal.Ring)(k) }

// build validates k and makes its ciphers; nil gives nil.
func build(k *Keyring) (*keyring, error) {
	r, err := seal.NewRing(k)
	return (*keyring)(r), err
}

// Covers reports whether j seals under k's Current key and opens all of k's
// key IDs: whether records meant to be sealed under k are, through j. A nil
// k is covered by any journal; an invalid one by none.
func (j *Journal) Covers(k *Keyring) bool {
	o, err := seal.NewRing(k)
	return err == nil && j.keyring.ring().Covers(o)
}
