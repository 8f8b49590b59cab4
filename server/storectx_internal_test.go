// storectx_internal_test.go checks the Store call's context: it ends at its deadline
// whether the Store reads Err or waits on Done, ends when the call returns, and keeps the
// request's values.

package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

func TestStoreCtxDoneClosesAtDeadline(t *testing.T) {
	parent := context.WithValue(context.WithoutCancel(context.Background()), ctxKey{}, "v")
	var got error
	err := callWithin(parent, time.Millisecond, func(ctx context.Context) error {
		if ctx.Value(ctxKey{}) != "v" {
			t.Error("the request's values are lost")
		}
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > time.Millisecond {
			t.Errorf("Deadline() = %v, %v", d, ok)
		}
		<-ctx.Done() // a blocking Store: ends by the timer
		got = ctx.Err()
		return got
	})
	if !errors.Is(got, context.DeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, want DeadlineExceeded", got)
	}
}

func TestStoreCtxErrPastDeadlineWithoutDone(t *testing.T) {
	c := &storeCtx{parent: context.Background(), deadline: time.Now().Add(-time.Nanosecond)}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() past the deadline = %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Err reported the deadline")
	}
}

func TestStoreCtxEndsWhenTheCallReturns(t *testing.T) {
	var kept context.Context
	_ = callWithin(context.WithoutCancel(context.Background()), time.Hour, func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			t.Errorf("Err() before the deadline = %v", err)
		}
		kept = ctx
		_ = ctx.Done()
		return nil
	})
	<-kept.Done()
	if !errors.Is(kept.Err(), context.Canceled) {
		t.Fatalf("Err() after the call = %v, want Canceled", kept.Err())
	}
}

func TestStoreCtxCancellableParentFallsBack(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	cancel()
	_ = callWithin(parent, time.Hour, func(ctx context.Context) error {
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("a cancelled parent's call: Err() = %v", ctx.Err())
		}
		return nil
	})
}

// What context.AfterFunc registers (pgx does, for each statement it sends) is kept by the
// context itself, not watched by a goroutine of the context package's: it is called when
// the call returns, or at the deadline, and stop takes it back before that.
func TestStoreCtxAfterFunc(t *testing.T) {
	parent := context.WithoutCancel(context.Background())
	called := make(chan string, 3)
	var c *storeCtx
	_ = callWithin(parent, time.Hour, func(ctx context.Context) error {
		c = ctx.(*storeCtx)
		stop := context.AfterFunc(ctx, func() { called <- "stopped" })
		context.AfterFunc(ctx, func() { called <- "at the end" })
		child, cancel := context.WithCancel(ctx) // joins without a goroutine too
		defer cancel()
		c.mu.Lock()
		n := c.funcs.Len()
		c.mu.Unlock()
		if n != 3 {
			t.Errorf("%d functions kept by the context, want 3 (2 AfterFunc, 1 child)", n)
		}
		if !stop() || stop() {
			t.Error("stop: want true once, then false")
		}
		context.AfterFunc(child, func() { called <- "child" })
		return nil
	})
	got := map[string]bool{<-called: true, <-called: true}
	if !got["at the end"] || !got["child"] {
		t.Fatalf("called %v, want the registration and the child's, once the call returned", got)
	}

	// Past its deadline, the context calls what it holds, and what comes later at once.
	err := callWithin(parent, time.Millisecond, func(ctx context.Context) error {
		context.AfterFunc(ctx, func() { called <- "at the deadline" })
		<-ctx.Done()
		if got := <-called; got != "at the deadline" {
			t.Errorf("called %q", got)
		}
		stop := context.AfterFunc(ctx, func() { called <- "late" })
		if got := <-called; got != "late" || stop() {
			t.Errorf("registered after the end: called %q, stop true", got)
		}
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if len(called) != 0 {
		t.Fatalf("%d more calls, want none", len(called))
	}
}
