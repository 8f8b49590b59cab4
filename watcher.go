// This file holds the attempt-timeout watcher: one timer per Transport
// that ends each attempt context (attemptctx.go) whose Options.AttemptTimeout
// (or WithAttemptTimeout's) passed before its response headers came, in
// place of a context and a timer per attempt.

package idem

import (
	"context"
	"math"
	"sync"
	"time"
)

// watchEpoch is the origin of the watcher's clock: monotonic readings
// since it, in nanoseconds, so a wall-clock step moves no timeout.
var watchEpoch = time.Now()

func watchNow() int64 { return int64(time.Since(watchEpoch)) }

// watcher holds the attempts under a timeout, in a heap by deadline, and
// one timer set for the earliest. Its zero value is ready; it is safe for
// concurrent use.
type watcher struct {
	mu    sync.Mutex
	heap  []*attemptCtx
	timer *time.Timer // made at the first add; runs fire
	at    int64       // when timer fires (watchNow), or 0 if it is stopped
}

// add ends c with context.Canceled, c.timedOut set, once d has passed,
// unless remove takes it out first. d must be positive.
func (w *watcher) add(c *attemptCtx, d time.Duration) {
	now := watchNow()
	c.deadline = math.MaxInt64
	if int64(d) < math.MaxInt64-now {
		c.deadline = now + int64(d)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c.index = len(w.heap)
	w.heap = append(w.heap, c)
	w.up(c.index)
	if w.at == 0 || c.deadline < w.at {
		w.arm(c.deadline, now)
	}
}

// remove takes c out, if it is still in: its timeout no longer applies.
func (w *watcher) remove(c *attemptCtx) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.index < 0 {
		return
	}
	i, last := c.index, len(w.heap)-1
	w.swap(i, last)
	w.heap[last] = nil
	w.heap = w.heap[:last]
	c.index = -1
	if i < last {
		w.down(i)
		w.up(i)
	}
	if last == 0 && w.at != 0 {
		w.timer.Stop() // nothing to watch: no timer left behind
		w.at = 0
	}
}

// fire ends the attempts whose deadline passed and sets the timer for the
// next one.
func (w *watcher) fire() {
	var due []*attemptCtx
	w.mu.Lock()
	now := watchNow()
	for len(w.heap) > 0 && w.heap[0].deadline <= now {
		c := w.heap[0]
		last := len(w.heap) - 1
		w.swap(0, last)
		w.heap[last] = nil
		w.heap = w.heap[:last]
		c.index = -1
		w.down(0)
		due = append(due, c)
	}
	w.at = 0
	if len(w.heap) > 0 {
		w.arm(w.heap[0].deadline, now)
	}
	w.mu.Unlock()
	for _, c := range due {
		c.timedOut.Store(true)
		c.end(context.Canceled)
	}
}

// arm sets the timer to fire at deadline; mu is held.
func (w *watcher) arm(deadline, now int64) {
	d := time.Duration(deadline - now)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
	} else {
		w.timer.Reset(d)
	}
	w.at = deadline
}

func (w *watcher) less(i, j int) bool { return w.heap[i].deadline < w.heap[j].deadline }

func (w *watcher) swap(i, j int) {
	w.heap[i], w.heap[j] = w.heap[j], w.heap[i]
	w.heap[i].index, w.heap[j].index = i, j
}

func (w *watcher) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !w.less(i, p) {
			return
		}
		w.swap(i, p)
		i = p
	}
}

func (w *watcher) down(i int) {
	n := len(w.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && w.less(r, l) {
			m = r
		}
		if !w.less(m, i) {
			return
		}
		w.swap(i, m)
		i = m
	}
}
