// record_internal_test.go checks the chains of records whose Scopes share a hash, which
// real hashes almost never make: each is found by its own Scope and deleted alone.

package memstore

import (
	"slices"
	"strconv"
	"testing"

	"github.com/idem-go/idem/server"
)

func TestHashCollisionsChained(t *testing.T) {
	s := New(nil)
	scope := func(i int) server.Scope { return server.Scope{Method: "POST", Path: "/p", Key: strconv.Itoa(i)} }
	const h = 42 // one hash for all
	for i := range 4 {
		data, scopeEnd, tokenEnd := recordData(scope(i), "t"+strconv.Itoa(i), "fp")
		s.insert(h, data, scopeEnd, tokenEnd, 1, 1)
	}
	check := func(gone ...int) {
		t.Helper()
		for i := range 4 {
			j := s.find(scope(i), h)
			switch isGone := slices.Contains(gone, i); {
			case isGone && j >= 0:
				t.Fatalf("scope %d found in slot %d after its removal", i, j)
			case !isGone && (j < 0 || string(s.token(j)) != "t"+strconv.Itoa(i)):
				t.Fatalf("scope %d: slot %d, want its own record", i, j)
			}
		}
		if s.find(scope(9), h) >= 0 {
			t.Fatal("a Scope never inserted was found")
		}
	}
	check()
	s.remove(s.find(scope(1), h)) // in the chain's middle
	check(1)
	s.remove(s.find(scope(3), h)) // its head (the last inserted)
	check(1, 3)
	s.remove(s.find(scope(0), h)) // its tail
	check(0, 1, 3)
	s.remove(s.find(scope(2), h))
	if _, ok := s.index[h]; ok || s.inUse != 0 {
		t.Fatalf("after every removal: index %v, %d in use; want both empty", s.index, s.inUse)
	}
}

// scopeIs tells apart Scopes whose fields join into the same bytes.
func TestScopeIsByField(t *testing.T) {
	enc := appendScope(nil, server.Scope{Method: "POST", Path: "/ab", Key: "c"})
	if !scopeIs(enc, server.Scope{Method: "POST", Path: "/ab", Key: "c"}) {
		t.Fatal("its own Scope does not match")
	}
	if scopeIs(enc, server.Scope{Method: "POST", Path: "/a", Key: "bc"}) {
		t.Fatal("a Scope with the same bytes split otherwise matches")
	}
}
