// store_test.go: Scope.ID is the hex SHA-256 of the length-prefixed fields, whatever their
// length, and allocates only its string.

package server_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/idem-go/idem/server"
)

// scopeIDOracle is Scope.ID written plainly, streaming into the hash.
func scopeIDOracle(sc server.Scope) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range []string{sc.Identity, sc.Method, sc.Path, sc.Key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestScopeIDIsLengthPrefixedSHA256(t *testing.T) {
	long := strings.Repeat("p/", 400) // past the stack buffer
	for _, sc := range []server.Scope{
		{},
		{Identity: "id", Method: "POST", Path: "/payments", Key: "k1"},
		{Identity: "a", Method: "b", Path: "", Key: "c"},
		{Identity: "", Method: "ab", Path: "c", Key: ""}, // the same bytes as the one above, other fields
		{Identity: "acct-9", Method: "PATCH", Path: long, Key: strings.Repeat("K", 255)},
	} {
		if got, want := sc.ID(), scopeIDOracle(sc); got != want {
			t.Errorf("ID of %+v = %s, want %s", sc, got, want)
		}
	}
}

func TestScopeIDAllocatesOnce(t *testing.T) {
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/payments", Key: "k1"}
	if n := testing.AllocsPerRun(100, func() { _ = sc.ID() }); n != 1 {
		t.Errorf("Scope.ID allocates %v times, want 1", n)
	}
}
