// scopeid.go computes a record's primary key, server.Scope.ID(), with one allocation (the
// string) instead of the three of the general method: it is on every statement's path.

package pgstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/idem-go/idem/server"
)

// scopeID returns sc.ID(): hex SHA-256 over sc's four fields, each preceded by its
// length as a big-endian uint64. The fields are gathered on the stack (on the heap only
// if they total more than about 450 bytes).
func scopeID(sc server.Scope) string {
	var stack [512]byte
	b := stack[:0]
	for _, f := range [...]string{sc.Identity, sc.Method, sc.Path, sc.Key} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}
