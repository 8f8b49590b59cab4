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
