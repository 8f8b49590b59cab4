// storectx.go is the context of one Store call: the request's values and a deadline
// StoreTimeout away, like context.WithTimeout's, but it arms a timer only when the Store
// asks for Done. A Store that does not block (memstore) reads Err and Deadline and costs
// no timer; one that does (Redis, PostgreSQL) gets a Done channel closed at the deadline.
// Its AfterFunc method keeps what context.AfterFunc registers (pgx does, for each
// statement), which would otherwise cost a goroutine waiting for Done each time.

package server

import (
	"context"
	"sync"
	"time"

	"github.com/idem-go/idem/internal/afterfunc"
)

// storeCtx is a context.Context that ends at deadline, or when released. Its parent gives
// the values only and must never be done (the request's context without cancellation);
// callWithin uses context.WithTimeout for any other parent. It is safe for concurrent use,
// as every context is.
type storeCtx struct {
	parent   context.Context
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{}   // made by the first Done
	timer *time.Timer     // closes done at deadline; armed by the first Done
	err   error           // DeadlineExceeded or Canceled once ended
	funcs afterfunc.Funcs // AfterFunc's, until the context ends
}

// callWithin calls f with a context that has parent's values and ends d from now, or
// when f returns.
func callWithin(parent context.Context, d time.Duration, f func(context.Context) error) error {
	if parent.Done() != nil {
		ctx, cancel := context.WithTimeout(parent, d)
		defer cancel()
		return f(ctx)
	}
	c := &storeCtx{parent: parent, deadline: time.Now().Add(d)}
	defer c.release()
	return f(c)
}

func (c *storeCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *storeCtx) Value(key any) any { return c.parent.Value(key) }

// Done returns a channel closed at the deadline or on release; the first call arms the
// timer that closes it.
func (c *storeCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	c.expireIfDue(time.Now())
	if c.err != nil {
		close(c.done)
	} else {
		c.timer = time.AfterFunc(time.Until(c.deadline), c.expire)
	}
	return c.done
}

// Err reads the clock: past the deadline, the context has ended, timer or not.
func (c *storeCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errLocked()
}

// errLocked is Err with mu held.
func (c *storeCtx) errLocked() error {
	if c.expireIfDue(time.Now()) && c.done != nil {
		close(c.done)
	}
	return c.err
}

// expireIfDue ends the context with DeadlineExceeded if it has not ended and now is past
// the deadline, and reports whether it did. Called with mu held.
func (c *storeCtx) expireIfDue(now time.Time) bool {
	if c.err != nil || now.Before(c.deadline) {
		return false
	}
	c.err = context.DeadlineExceeded
	return true
}

// expire is the timer's call.
func (c *storeCtx) expire() {
	c.mu.Lock()
	if c.err == nil {
		c.err = context.DeadlineExceeded
		close(c.done)
	}
	funcs := c.funcs.Take()
	c.mu.Unlock()
	funcs.Call()
}

// release ends the context with Canceled, as a CancelFunc does, and stops its timer.
func (c *storeCtx) release() {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.err == nil {
		c.err = context.Canceled
		if c.done != nil {
			close(c.done)
		}
	}
	funcs := c.funcs.Take()
	c.mu.Unlock()
	funcs.Call()
}

// AfterFunc arranges for f to be called once c ends, as context.AfterFunc does (which
// calls this method); stop reports whether it kept f from being called.
func (c *storeCtx) AfterFunc(f func()) (stop func() bool) {
	return c.funcs.AfterFunc(&c.mu, func() bool { return c.errLocked() != nil }, f)
}

func (c *storeCtx) String() string { return "server.storeCtx" }
