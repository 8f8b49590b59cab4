// Tests of the attempt-timeout watcher (watcher.go): it ends what is due,
// spares what was removed, keeps its heap in order and leaves no timer set
// when it watches nothing.

package idem

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newWatched(t *testing.T) *attemptCtx {
	t.Helper()
	c := new(attemptCtx)
	c.start(context.Background(), new(callInfo), nil)
	return c
}

func TestWatcherEndsWhatIsDue(t *testing.T) {
	var w watcher
	slow, fast, never, removed := newWatched(t), newWatched(t), newWatched(t), newWatched(t)
	w.add(never, time.Hour)
	w.add(slow, 40*time.Millisecond)
	w.add(removed, 10*time.Millisecond)
	w.add(fast, 20*time.Millisecond)
	w.remove(removed)
	waitDone(t, fast)
	waitDone(t, slow)
	require.True(t, fast.timedOut.Load())
	require.True(t, slow.timedOut.Load())
	require.ErrorIs(t, slow.Err(), context.Canceled)
	require.NoError(t, removed.Err(), "removed before its time")
	require.False(t, removed.timedOut.Load())
	require.NoError(t, never.Err())

	w.mu.Lock()
	require.Len(t, w.heap, 1)
	require.NotZero(t, w.at, "the timer is set for the hour")
	w.mu.Unlock()
	w.remove(never)
	w.remove(never) // twice is harmless
	require.Empty(t, w.heap)
	require.Zero(t, w.at, "no timer left set")
	require.False(t, w.timer.Stop(), "stopped already")

	huge := newWatched(t) // a deadline past the clock's range saturates
	w.add(huge, time.Duration(1<<63-1))
	w.remove(huge)
	require.Zero(t, w.at)
}

// Random adds and removes keep the heap ordered and every index true.
func TestWatcherHeap(t *testing.T) {
	var w watcher
	r := rand.New(rand.NewPCG(1, 2))
	var in []*attemptCtx
	check := func() {
		t.Helper()
		w.mu.Lock()
		defer w.mu.Unlock()
		require.Len(t, w.heap, len(in))
		for i, c := range w.heap {
			require.Equal(t, i, c.index)
			if i > 0 {
				require.LessOrEqual(t, w.heap[(i-1)/2].deadline, c.deadline, "heap order at %d", i)
			}
		}
		if len(w.heap) > 0 {
			// Set for the earliest, or earlier (a removal does not move it:
			// firing early sets it again).
			require.NotZero(t, w.at)
			require.LessOrEqual(t, w.at, w.heap[0].deadline)
		}
	}
	for range 500 {
		if len(in) > 0 && r.IntN(3) == 0 {
			i := r.IntN(len(in))
			w.remove(in[i])
			require.Equal(t, -1, in[i].index)
			in = append(in[:i], in[i+1:]...)
		} else {
			c := newWatched(t)
			w.add(c, time.Hour+time.Duration(r.IntN(1000))*time.Second)
			in = append(in, c)
		}
		check()
	}
	for _, c := range in {
		w.remove(c)
	}
	in = nil
	check()
	require.Zero(t, w.at)
}
