package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/server/internal/lease/leasetest"
)

// waitSets waits until clock's timers have been set n times in all: the keeper sets its
// timer after the events the test causes.
func waitSets(t *testing.T, clock *leasetest.ManualClock, n int) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		got, changed := clock.Sets()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("the keeper set its timer %d times, want %d", got, n)
		}
	}
}

var (
	errLost        = errors.New("lost")
	errUnconfirmed = errors.New("unconfirmed")
	errTimeout     = errors.New("timeout")
)

// harness is a Keeper on a fake clock whose renewals the test answers one by one.
type harness struct {
	t       *testing.T
	clock   *leasetest.ManualClock
	calls   chan chan error // each renewal hands the test a channel for its answer
	causes  chan error
	keeper  *Keeper
	started time.Time
}

const lease = 30 * time.Second

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clock: leasetest.NewManualClock(time.Unix(1000, 0)), calls: make(chan chan error), causes: make(chan error, 2)}
	h.started = h.clock.Now()
	h.keeper = Keep(context.Background(), Config{
		Lease:   lease,
		Timeout: time.Second,
		Renew: func(context.Context) error {
			answer := make(chan error)
			h.calls <- answer
			return <-answer
		},
		Refused:     func(err error) bool { return errors.Is(err, errLost) },
		Cancel:      func(cause error) { h.causes <- cause },
		Lost:        errLost,
		Unconfirmed: errUnconfirmed,
		Failed:      func(error) {},
		Clock:       h.clock,
		Shared:      sharedFor(t, h.clock),
	}, h.started)
	t.Cleanup(func() { h.keeper.Stop() })
	return h
}

// renewal advances the clock by d and answers the renewal that follows with err, then
// waits for the keeper to take the answer in.
func (h *harness) renewal(d time.Duration, err error) {
	h.t.Helper()
	h.clock.Advance(d)
	var answer chan error
	select {
	case answer = <-h.calls:
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no renewal %v after the last", d)
	}
	h.answer(answer, err)
}

// answer answers a renewal with err and waits for the keeper to take it in: it sets its
// timer for what comes next, unless the lease is lost.
func (h *harness) answer(answer chan error, err error) {
	n, _ := h.clock.Sets()
	answer <- err
	if !errors.Is(err, errLost) {
		waitSets(h.t, h.clock, n+1)
	}
}

func (h *harness) noCause() {
	h.t.Helper()
	select {
	case c := <-h.causes:
		h.t.Fatalf("cancelled with %v", c)
	case <-time.After(10 * time.Millisecond):
	}
}

func (h *harness) cause() error {
	h.t.Helper()
	select {
	case c := <-h.causes:
		return c
	case <-time.After(5 * time.Second):
		h.t.Fatal("never cancelled")
		return nil
	}
}

// Confirmed renewals every third of a lease keep the holder going; each moves the local
// deadline to its send time + Lease - Margin.
func TestKeeperRenewsEveryThird(t *testing.T) { bothTimers(t, testKeeperRenewsEveryThird) }

func testKeeperRenewsEveryThird(t *testing.T) {
	h := newHarness(t)
	for range 5 {
		h.renewal(lease/3, nil)
	}
	h.noCause()
	deadline, cause := h.keeper.Stop()
	if cause != nil || !deadline.Equal(h.started.Add(5*lease/3+lease-Margin(lease))) {
		t.Errorf("Stop = %v, %v; want the fifth renewal's deadline and no cause", deadline, cause)
	}
}

// Renewals without an answer are tried again every tenth of a lease; when the local
// deadline passes, the holder is cancelled with Unconfirmed, before the lease could end.
func TestKeeperCancelsWhenUnconfirmed(t *testing.T) { bothTimers(t, testKeeperCancelsWhenUnconfirmed) }

func testKeeperCancelsWhenUnconfirmed(t *testing.T) {
	h := newHarness(t)
	h.renewal(lease/3, errTimeout) // at 10 s
	h.renewal(lease/10, errTimeout)
	h.renewal(lease/10, errTimeout) // at 16 s
	h.noCause()
	h.clock.Advance(lease - Margin(lease) - 16*time.Second) // the deadline: 24 s
	if c := h.cause(); !errors.Is(c, errUnconfirmed) {
		t.Fatalf("cancelled with %v, want Unconfirmed", c)
	}
	if h.clock.Now().Sub(h.started) >= lease {
		t.Fatal("cancelled only once the lease could have ended")
	}
	h.renewal(lease/10, nil) // renewals go on, and a late confirmation cancels nothing more
	h.noCause()
	if _, cause := h.keeper.Stop(); !errors.Is(cause, errUnconfirmed) {
		t.Errorf("Stop's cause = %v", cause)
	}
}

// A refused renewal cancels the holder with Lost at once, and renewals stop.
func TestKeeperCancelsWhenLost(t *testing.T) { bothTimers(t, testKeeperCancelsWhenLost) }

func testKeeperCancelsWhenLost(t *testing.T) {
	h := newHarness(t)
	h.renewal(lease/3, errLost)
	if c := h.cause(); !errors.Is(c, errLost) {
		t.Fatalf("cancelled with %v, want Lost", c)
	}
	h.clock.Advance(lease)
	select {
	case <-h.calls:
		t.Fatal("a renewal after the loss")
	case <-time.After(10 * time.Millisecond):
	}
}

// A renewal whose answer comes late does not hold the deadline back: the deadline is
// the send time of the last confirmed renewal, so a slow confirmation cannot stretch it.
func TestKeeperDeadlineFromSendTime(t *testing.T) { bothTimers(t, testKeeperDeadlineFromSendTime) }

func testKeeperDeadlineFromSendTime(t *testing.T) {
	h := newHarness(t)
	h.clock.Advance(lease / 3)
	answer := <-h.calls        // sent at 10 s
	h.clock.Advance(lease / 2) // its answer comes at 25 s, past the first deadline (24 s)
	if c := h.cause(); !errors.Is(c, errUnconfirmed) {
		t.Fatalf("cancelled with %v, want Unconfirmed at the first deadline", c)
	}
	h.answer(answer, nil)
	deadline, _ := h.keeper.Stop()
	if want := h.started.Add(lease/3 + lease - Margin(lease)); !deadline.Equal(want) {
		t.Errorf("deadline %v, want %v (send time + Lease - Margin)", deadline, want)
	}
}

// A claim confirmed late (tried again, or answered slowly) is renewed at once, before its
// deadline, rather than a third of a lease after the keeper started.
func TestKeeperRenewsSlowClaimAtOnce(t *testing.T) { bothTimers(t, testKeeperRenewsSlowClaimAtOnce) }

func testKeeperRenewsSlowClaimAtOnce(t *testing.T) {
	clock := leasetest.NewManualClock(time.Unix(1000, 0))
	calls := make(chan chan error, 1)
	causes := make(chan error, 1)
	confirmed := clock.Now().Add(-lease / 2) // the claim was sent half a lease ago
	k := Keep(context.Background(), Config{
		Lease: lease, Timeout: time.Second,
		Renew: func(context.Context) error {
			answer := make(chan error)
			calls <- answer
			return <-answer
		},
		Refused: func(err error) bool { return errors.Is(err, errLost) },
		Cancel:  func(cause error) { causes <- cause },
		Lost:    errLost, Unconfirmed: errUnconfirmed, Failed: func(error) {}, Clock: clock,
	}, confirmed)
	defer k.Stop()
	select {
	case answer := <-calls:
		answer <- nil
	case <-time.After(5 * time.Second):
		t.Fatal("no renewal for a claim confirmed half a lease ago")
	}
	select {
	case c := <-causes:
		t.Fatalf("cancelled with %v", c)
	case <-time.After(10 * time.Millisecond):
	}
}

// A holder that stops within a third of a lease never renews, and nothing fires later.
func TestKeeperShortHolderNeverRenews(t *testing.T) { bothTimers(t, testKeeperShortHolderNeverRenews) }

func testKeeperShortHolderNeverRenews(t *testing.T) {
	h := newHarness(t)
	h.clock.Advance(lease / 4)
	if deadline, cause := h.keeper.Stop(); cause != nil || !deadline.Equal(h.started.Add(lease-Margin(lease))) {
		t.Fatalf("Stop = %v, %v; want the claim's deadline and no cause", deadline, cause)
	}
	h.clock.Advance(2 * lease)
	select {
	case <-h.calls:
		t.Fatal("a renewal after Stop")
	case c := <-h.causes:
		t.Fatalf("cancelled with %v after Stop", c)
	case <-time.After(10 * time.Millisecond):
	}
}

// bothTimers runs test with a Keeper's own timer and with a Shared one.
func bothTimers(t *testing.T, test func(*testing.T)) {
	t.Run("own", test)
	t.Run("shared", test)
}

// sharedFor is a Shared on clock for the "shared" run of bothTimers, else nil.
func sharedFor(t *testing.T, clock Clock) *Shared {
	if strings.HasSuffix(t.Name(), "/shared") {
		return NewShared(clock)
	}
	return nil
}
