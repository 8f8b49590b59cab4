// scopeid_internal_test.go: scopeID names a record exactly as server.Scope.ID() does
// (rows written by either must be found by the other), with one allocation.

package pgstore

import (
	"strings"
	"testing"

	"github.com/idem-go/idem/server"
)

func TestScopeIDIsScopeID(t *testing.T) {
	long := strings.Repeat("p/", 400) // past the stack buffer
	for _, sc := range []server.Scope{
		{},
		{Identity: "id", Method: "POST", Path: "/payments", Key: "k1"},
		{Identity: "a", Method: "b", Path: "", Key: "c"},
		{Identity: "", Method: "ab", Path: "c", Key: ""}, // the same bytes as the one above, other fields
		{Identity: "acct-9", Method: "PATCH", Path: long, Key: strings.Repeat("K", 255)},
	} {
		if got, want := scopeID(sc), sc.ID(); got != want {
			t.Errorf("scopeID(%+v) = %s, want %s", sc, got, want)
		}
	}
}

func TestScopeIDAllocatesOnce(t *testing.T) {
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/payments", Key: "k1"}
	if n := testing.AllocsPerRun(100, func() { _ = scopeID(sc) }); n != 1 {
		t.Errorf("scopeID allocates %v times, want 1", n)
	}
}
