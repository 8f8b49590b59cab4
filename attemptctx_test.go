// Tests of an attempt's context (attemptctx.go): its values, how it ends,
// and net/http's child contexts hanging on it through its AfterFunc.

package idem

import (
	"context"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type testCtxKey struct{}

// waitDone waits, at most a few seconds, for ctx to end.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end")
	}
}

// The attempt's context answers the trace and ResponseInfo keys itself and
// passes the others to the caller's context; a caller's own trace still
// hears every event.
func TestAttemptCtxValues(t *testing.T) {
	parent := context.WithValue(context.Background(), testCtxKey{}, "caller's")
	info := new(callInfo)
	st := new(attemptState)
	st.trace.WroteHeaders = st.wroteHeaders
	c := &st.ctx
	c.start(parent, info, &st.trace)
	require.NotNil(t, traceKey, "httptrace's key found")
	require.Same(t, info, c.Value(infoCtxKey{}))
	require.Same(t, &st.trace, httptrace.ContextClientTrace(c))
	require.Equal(t, "caller's", c.Value(testCtxKey{}))
	require.Nil(t, c.Value("absent"))
	_, ok := c.Deadline()
	require.False(t, ok)

	// Without a trace, the caller's (here: none) is what httptrace finds.
	bare := new(attemptCtx)
	bare.start(parent, info, nil)
	require.Nil(t, httptrace.ContextClientTrace(bare))

	// A caller's own trace is composed with the attempt's: both hear.
	heard := false
	traced := httptrace.WithClientTrace(parent, &httptrace.ClientTrace{WroteHeaders: func() { heard = true }})
	st2 := new(attemptState)
	st2.trace.WroteHeaders = st2.wroteHeaders
	st2.ctx.start(traced, info, &st2.trace)
	httptrace.ContextClientTrace(&st2.ctx).WroteHeaders()
	require.True(t, heard, "the caller's hook")
	require.True(t, st2.written.Load(), "the attempt's hook")

	deadline := time.Now().Add(time.Hour)
	withDeadline, cancel := context.WithDeadline(parent, deadline)
	defer cancel()
	d := new(attemptCtx)
	d.start(withDeadline, info, nil)
	got, ok := d.Deadline()
	require.True(t, ok)
	require.Equal(t, deadline, got)
	d.end(context.Canceled)
}

// A context made from the attempt's, as net/http makes one for each
// request, ends with it, at once (no goroutine in between), and takes its
// registration back when it ends first.
func TestAttemptCtxChildren(t *testing.T) {
	c := new(attemptCtx)
	c.start(context.Background(), new(callInfo), nil)
	done := c.Done()
	require.NoError(t, c.Err())

	early, cancelEarly := context.WithCancelCause(c)
	late, cancelLate := context.WithCancel(c)
	defer cancelLate()
	require.Equal(t, 2, c.funcs.Len(), "both children hang on c")
	cancelEarly(nil)
	require.Equal(t, 1, c.funcs.Len(), "the child that ended took its registration back")
	require.ErrorIs(t, early.Err(), context.Canceled)

	c.end(context.Canceled)
	require.ErrorIs(t, late.Err(), context.Canceled, "ended before end returned")
	require.ErrorIs(t, c.Err(), context.Canceled)
	select {
	case <-done:
	default:
		t.Fatal("Done not closed")
	}
	require.Zero(t, c.funcs.Len())
	c.end(context.DeadlineExceeded) // a second end changes nothing
	require.ErrorIs(t, c.Err(), context.Canceled)

	// Registered after the end: called soon, and too late to stop.
	called := make(chan struct{})
	stop := context.AfterFunc(c, func() { close(called) })
	<-called
	require.False(t, stop())

	// A context never asked for Done ends with a closed one.
	fresh := new(attemptCtx)
	fresh.start(context.Background(), new(callInfo), nil)
	fresh.end(context.Canceled)
	<-fresh.Done()
}

// Over a caller's context that can end, the attempt's is a child of it:
// it ends with the caller's, or alone, and the children net/http makes of
// it join it as they join any context.WithCancel.
func TestAttemptCtxFollowsCaller(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	c := new(attemptCtx)
	c.start(parent, new(callInfo), nil)
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	require.Zero(t, c.funcs.Len(), "the child joined the context package's own")
	cancel()
	waitDone(t, c)
	waitDone(t, child)
	require.ErrorIs(t, c.Err(), context.Canceled)

	gone := new(attemptCtx)
	gone.start(parent, new(callInfo), nil) // ended already
	require.ErrorIs(t, gone.Err(), context.Canceled)

	expiring, cancelExpiring := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelExpiring()
	timed := new(attemptCtx)
	timed.start(expiring, new(callInfo), nil)
	waitDone(t, timed)
	require.ErrorIs(t, timed.Err(), context.DeadlineExceeded)

	live, cancelLive := context.WithCancel(context.Background())
	defer cancelLive()
	over := new(attemptCtx)
	over.start(live, new(callInfo), nil)
	grandchild, cancelGrandchild := context.WithCancel(over)
	defer cancelGrandchild()
	over.end(context.Canceled)
	require.ErrorIs(t, over.Err(), context.Canceled)
	require.ErrorIs(t, grandchild.Err(), context.Canceled)
	require.NoError(t, live.Err(), "the caller's context goes on")
	stop := context.AfterFunc(over, func() {})
	require.False(t, stop(), "ended already")
}
