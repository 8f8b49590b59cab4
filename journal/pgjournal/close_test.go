// Tests of a closed Journal: it keeps no lease, and changes nothing.

package pgjournal

import (
	"testing"

	"github.com/idem-go/idem/journal"
)

// A claim made after Close is this process's alone (journal.Store: claims
// keep working after Close): it takes no lease on the row, which nobody
// would renew or give up, so another instance may claim the row at once.
func TestClaimAfterCloseTakesNoLease(t *testing.T) {
	a, b, _ := pair(t)
	rec := pendingRec(t, "after-close")
	name := journal.NameOf(rec)
	claimCreate(t, a, rec)
	a.Release(name)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !a.TryClaim(name) {
		t.Fatal("TryClaim after Close failed: claims keep working after Close")
	}
	a.Release(name)
	if err := a.Claim(bg, name); err != nil {
		t.Fatalf("Claim after Close: %v", err)
	}
	defer a.Release(name)
	if !b.TryClaim(name) {
		t.Fatal("b cannot claim a row that a closed Journal claimed: a leased it and will never give it up")
	}
	b.Release(name)
}
