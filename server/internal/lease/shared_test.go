// shared_test.go: Keepers sharing one timer each renew when their first renewal is due,
// a stopped one never does, and one started out of order gets a timer of its own.

package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idem-go/idem/server/internal/lease/leasetest"
)

func TestSharedRenewsOnlyLiveKeepers(t *testing.T) {
	clock := leasetest.NewManualClock(time.Unix(1000, 0))
	shared := NewShared(clock)
	renewed := make(chan int, 10)
	start := func(n int, confirmed time.Time) *Keeper {
		return KeepHolder(context.Background(), &Config{
			Lease: lease, Timeout: time.Second,
			Refused: func(err error) bool { return errors.Is(err, errLost) },
			Lost:    errLost, Unconfirmed: errUnconfirmed, Clock: clock, Shared: shared,
		}, testHolder{n: n, renewed: renewed}, confirmed)
	}
	t0 := clock.Now()
	a, b, c := start(1, t0), start(2, t0), start(3, t0)
	late := start(4, t0.Add(-time.Second)) // its claim was sent before the others'
	if late.timer == nil || a.timer != nil {
		t.Fatal("a Keeper out of order waits on the shared timer, or one in order has its own")
	}
	b.Stop()
	if a.next != c || c.prev != a {
		t.Fatal("a stopped Keeper is still in the shared list: it would be kept until its renewal was due")
	}
	clock.Advance(lease / 3)
	got := map[int]bool{}
	for range 3 {
		select {
		case n := <-renewed:
			got[n] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("renewals %v, want 1, 3 and 4", got)
		}
	}
	if !got[1] || !got[3] || !got[4] {
		t.Fatalf("renewals %v, want 1, 3 and 4", got)
	}
	for _, k := range []*Keeper{a, c, late} {
		k.Stop()
		k.Idle()
	}
	select {
	case n := <-renewed:
		t.Fatalf("keeper %d renewed after it was stopped", n)
	default:
	}
}

type testHolder struct {
	n       int
	renewed chan int
}

func (h testHolder) Renew(context.Context) error { h.renewed <- h.n; return nil }
func (testHolder) Cancel(error)                  {}
func (testHolder) Failed(error)                  {}
