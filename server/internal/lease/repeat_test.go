package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// repeatOnce repeats f on p and returns how it ended.
func repeatOnce(t *testing.T, p *Repeater, until time.Time, f func(context.Context) error) (Result, error) {
	t.Helper()
	type ended struct {
		r   Result
		err error
	}
	got := make(chan ended, 1)
	if !p.Start(context.Background(), until, f, func(r Result, err error) { got <- ended{r, err} }) {
		t.Fatal("Start refused")
	}
	select {
	case e := <-got:
		return e.r, e.err
	case <-time.After(5 * time.Second):
		t.Fatal("the repeat never ended")
		return 0, nil
	}
}

func newTestRepeater() *Repeater {
	return NewRepeater(2, time.Second, 20*time.Millisecond, func(err error) bool { return errors.Is(err, errLost) })
}

// A call without an answer is repeated until it lands; a refusal ends it; so does its
// deadline.
func TestRepeaterEnds(t *testing.T) {
	p := newTestRepeater()
	var tries atomic.Int32
	r, err := repeatOnce(t, p, time.Now().Add(time.Hour), func(context.Context) error {
		if tries.Add(1) < 3 {
			return errTimeout
		}
		return nil
	})
	if r != Landed || err != nil || tries.Load() != 3 {
		t.Errorf("= %v, %v after %d tries; want Landed on the third", r, err, tries.Load())
	}
	if r, _ := repeatOnce(t, p, time.Now().Add(time.Hour), func(context.Context) error { return errLost }); r != Refused {
		t.Errorf("a refusal = %v, want Refused", r)
	}
	if r, err := repeatOnce(t, p, time.Now(), func(context.Context) error { return errTimeout }); r != GaveUp || !errors.Is(err, errTimeout) {
		t.Errorf("past its deadline = %v, %v; want GaveUp with the last error", r, err)
	}
}

// At most the limit is repeated at once; Shutdown waits until its context ends, then gives
// the rest up, and later Starts repeat nothing.
func TestRepeaterLimitAndShutdown(t *testing.T) {
	p := newTestRepeater()
	ended := make(chan Result, 2)
	never := func(context.Context) error { return errTimeout }
	for range 2 {
		if !p.Start(context.Background(), time.Now().Add(time.Hour), never, func(r Result, _ error) { ended <- r }) {
			t.Fatal("Start refused under the limit")
		}
	}
	if p.Start(context.Background(), time.Now().Add(time.Hour), never, func(Result, error) {}) {
		t.Fatal("Start past the limit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want its context's error", err)
	}
	for range 2 {
		if r := <-ended; r != GaveUp {
			t.Errorf("a repeat given up by Shutdown ended %v", r)
		}
	}
	if p.Start(context.Background(), time.Now().Add(time.Hour), never, func(Result, error) {}) {
		t.Error("Start after Shutdown")
	}
}
