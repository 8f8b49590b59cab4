// Bad input to Open and the Journal: a nil pool, odd namespaces, strings
// that PostgreSQL's jsonb refuses.

package pgjournal

import (
	"errors"
	"testing"

	"github.com/idem-go/idem/journal"
)

// A nil pool is invalid options, not a panic on its first use.
func TestOpenNilPool(t *testing.T) {
	if j, err := Open(bg, nil, nil); j != nil || !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Open(nil pool) = %v, %v; want ErrInvalidOptions", j, err)
	}
	if err := Migrate(bg, nil, nil); !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Migrate(nil pool) = %v; want ErrInvalidOptions", err)
	}
}
