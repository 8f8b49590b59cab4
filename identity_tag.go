// This file holds credential tags (Record.CredentialTag): an HMAC of a
// call's credentials under the journal's identity key (Store.IdentityKey;
// boltjournal's identity_key.go says what that protects against), so an
// operation is bound to its creator's credentials without them being
// written down.

package idem

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// credentialTagContext separates credential tags from any other use of the
// key, and names the encoding of credentials, should it ever change.
const credentialTagContext = "idem credential tag v1\x00"

// tagger makes credential tags under one identity key. It is safe for
// concurrent use.
type tagger struct {
	key    []byte
	hashes sync.Pool // of *tagHash under key
	// none is the tag of the empty credential set, what most calls carry:
	// made once.
	none func() string
}

func newTagger(key []byte) *tagger {
	g := &tagger{key: key}
	g.none = sync.OnceValue(func() string { return g.hmac(nil) })
	return g
}

// tag is Record.CredentialTag for a credential set as credentials encodes
// it: HMAC-SHA-256 under the identity key, cut to its first 128 bits (RFC
// 2104 section 5 allows cutting to half the output), in hex.
func (g *tagger) tag(creds []byte) string {
	if len(creds) == 0 {
		return g.none()
	}
	return g.hmac(creds)
}

func (g *tagger) hmac(creds []byte) string {
	h, _ := g.hashes.Get().(*tagHash)
	if h == nil {
		h = &tagHash{mac: hmac.New(sha256.New, g.key)}
	}
	h.mac.Write(credentialTagPrefix)
	h.mac.Write(creds)
	tag := hex.EncodeToString(h.mac.Sum(h.sum[:0])[:16])
	h.mac.Reset() // back to the keyed state, for the next tag
	g.hashes.Put(h)
	return tag
}

// tagHash is an HMAC-SHA-256 under the identity key, kept between tags:
// hmac.New costs five allocations a call. The key never changes, so every
// pooled hash is keyed alike.
type tagHash struct {
	mac hash.Hash
	sum [sha256.Size]byte
}

// credentialTagPrefix is credentialTagContext as the bytes hashed first.
var credentialTagPrefix = []byte(credentialTagContext)
