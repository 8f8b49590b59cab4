// This file holds what one attempt keeps (attemptState) and its context:
// the caller's context with the attempt's trace and ResponseInfo as values,
// ended by the caller's context, by the attempt timeout (the Transport's
// watcher, watcher.go) or once the attempt is over. Both live in the op, so
// an attempt allocates no context of its own, no value context and no timer.

package idem

import (
	"bytes"
	"context"
	"io"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/internal/afterfunc"
)

// attemptCtx is one attempt's context.Context. Value answers the trace and
// ResponseInfo keys and asks the caller's context for the others; Deadline
// is the caller's. Over a caller's context that can end, it is a
// context.WithCancel of it, which net/http's own child contexts join as
// they join any cancelCtx. Over one that never ends (context.Background,
// say), it ends itself, and has the AfterFunc method that context.AfterFunc
// and context.WithCancel look for, so those children hang on it without a
// goroutine: fewer allocations than a cancelCtx needs. It is safe for
// concurrent use; it must not be copied once used.
type attemptCtx struct {
	parent context.Context        // the caller's context, or (cancel set) the child of it this is
	cancel context.CancelFunc     // ends parent, a child of the caller's; nil if that never ends
	trace  *httptrace.ClientTrace // served for httptrace's key; nil: the parent's
	info   *callInfo              // served for infoCtxKey

	// When cancel is nil:
	mu    sync.Mutex
	done  chan struct{}   // made on first Done, or closedChan once ended
	err   error           // set once ended
	funcs afterfunc.Funcs // AfterFunc's, until the context ends

	timedOut atomic.Bool
	// Watcher's fields, under its lock: when the timeout ends the attempt
	// (nanoseconds on the watcher's clock) and the place in its heap (-1:
	// not in it).
	deadline int64
	index    int
}

// closedChan is the Done channel of an attemptCtx that ended before anyone
// asked for one.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// traceKey is httptrace's context key for a *ClientTrace, found once by
// asking httptrace.ContextClientTrace to look one up; nil if it could not be
// found, and then the trace goes in a context.WithValue of its own.
var traceKey = func() any {
	p := &keyProbe{Context: context.Background()}
	httptrace.ContextClientTrace(p)
	return p.key
}()

// keyProbe is a context that remembers the key it was last asked for.
type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(k any) any {
	p.key = k
	return nil
}

// start makes c the context of an attempt of the call with ctx, carrying
// info and (if not nil) trace.
func (c *attemptCtx) start(ctx context.Context, info *callInfo, trace *httptrace.ClientTrace) {
	c.info, c.index = info, -1
	if ctx.Done() != nil {
		ctx, c.cancel = context.WithCancel(ctx)
	}
	c.parent = ctx
	if trace != nil {
		if traceKey == nil || httptrace.ContextClientTrace(ctx) != nil {
			// The caller's own trace must hear too: httptrace composes them.
			c.parent = httptrace.WithClientTrace(ctx, trace)
		} else {
			c.trace = trace
		}
	}
}

// end ends c with err (context.Canceled if c is a child of the caller's
// context), if it has not ended already, and calls what was registered
// with AfterFunc, in this goroutine: the context package registers only its
// contexts' cancel functions, which do not block.
func (c *attemptCtx) end(err error) {
	if c.cancel != nil {
		c.cancel()
		return
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done == nil {
		c.done = closedChan
	} else {
		close(c.done)
	}
	funcs := c.funcs.Take()
	c.mu.Unlock()
	funcs.Call()
}

func (c *attemptCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *attemptCtx) Done() <-chan struct{} {
	if c.cancel != nil {
		return c.parent.Done()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *attemptCtx) Err() error {
	if c.cancel != nil {
		return c.parent.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *attemptCtx) Value(key any) any {
	switch {
	case key == infoCtxKey{}:
		return c.info
	case c.trace != nil && key == traceKey:
		return c.trace
	}
	return c.parent.Value(key)
}

// AfterFunc arranges for f to be called once c ends, as context.AfterFunc
// does; stop reports whether it kept f from being called.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	if c.cancel != nil {
		return context.AfterFunc(c.parent, f)
	}
	return c.funcs.AfterFunc(&c.mu, func() bool { return c.err != nil }, f)
}

func (c *attemptCtx) String() string { return "idem attempt context" }

// attemptState is what one attempt keeps, in one allocation: its context,
// whether its headers were written (and the trace that tells), the body
// that ends its context, and its request's body reader and header values.
type attemptState struct {
	ctx     attemptCtx
	written atomic.Bool
	trace   httptrace.ClientTrace
	body    attemptBody
	reader  bytes.Reader
	values  [2]string
}

func (w *attemptState) wroteHeaders() { w.written.Store(true) }

// attemptBody ends an attempt's context once the caller is done with the
// response body, as net/http.Client does for its timeouts.
type attemptBody struct {
	io.ReadCloser
	ctx *attemptCtx
}

func (b *attemptBody) Close() error {
	err := b.ReadCloser.Close()
	b.ctx.end(context.Canceled)
	return err
}

// cancelOnClose calls cancel once the caller is done with the response
// body: the connection of an attempt sent on a new one is closed then.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
	once   sync.Once
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.cancel)
	return err
}
