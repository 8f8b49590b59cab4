// This file holds the background resumer: a goroutine that runs Resume's
// passes (resume.go) as pending operations come due, for a long-running
// process that must not wait for its next restart. Client.StartResumer or
// Transport.StartResumer starts one; Client.Close, ctx or stop stops it.

package idem

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// minResumeGap keeps a resumer from spinning if an operation stays due after
// a pass; it is far below any useful retry interval.
const minResumeGap = 50 * time.Millisecond

// StartResumer starts a background resumer: a goroutine that runs Resume's
// passes over the journal for as long as the Client is open, and reports each
// outcome to fn, exactly as Resume does (fn must close Outcome.Response.Body;
// if fn is nil, idem closes it).
//
// A pass runs at once, then whenever the earliest pending operation's
// next-attempt time comes (including a server's Retry-After, and operations
// that calls in this process leave pending later), and at least every
// Options.ResumeInterval. At most Options.ResumeConcurrency operations are
// sent at once, the slots shared fairly among hosts as in Resume; a pass
// does not wait for the sends of the last one. Operations in flight in this
// process are never sent twice. If a pass cannot read the journal, fn gets
// an Outcome with a nil Record and the error, and the resumer tries again
// after ResumeInterval.
//
// fn is called from the resumer's goroutines, one call at a time. It must not
// call stop or Close (they wait for fn to return).
//
// The resumer stops when ctx ends (attempts in flight are canceled at once and
// their operations stay pending), when stop is called, or when the Client is
// closed. stop and Close are graceful: they start nothing new, wait up to
// Options.CloseTimeout for the operations being sent, then cancel the rest,
// which stay pending; they return once the resumer's goroutines have exited.
// stop may be called more than once, and after Close.
//
// WithMaxAttempts and WithAttemptTimeout on ctx apply to every operation the
// resumer sends; StartResumer panics if ctx carries an invalid one. After
// Close, StartResumer starts nothing and returns a stop that does nothing.
//
// Several resumers on one Client are safe but pointless: each operation is
// sent by one at a time.
func (c *Client) StartResumer(ctx context.Context, fn func(Outcome)) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return func() {}
	}
	return c.transport.StartResumer(ctx, fn)
}

// StartResumer starts a background resumer on the Transport, as
// Client.StartResumer does, for a Transport over a Store of your own (such
// as a fleet's PostgreSQL journal, whose resumer is also what adopts the
// operations of dead instances, at least every Options.ResumeInterval). It
// runs until ctx ends or stop is called; call stop before closing the
// Store. StartResumer panics if ctx carries an invalid WithMaxAttempts or
// WithAttemptTimeout.
func (t *Transport) StartResumer(ctx context.Context, fn func(Outcome)) (stop func()) {
	lim, err := t.cfg.callLimits(ctx)
	if err != nil {
		panic("idem: StartResumer: " + err.Error())
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &resumer{t: t, fn: fn, lim: lim, ctx: rctx, cancel: cancel,
		quit: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	t.resumers.add(r)
	go r.loop()
	return func() { r.stop(t.cfg.CloseTimeout) }
}

// resumer is one background resumer. Its loop runs in one goroutine; note
// and stop are called from others.
type resumer struct {
	t      *Transport
	fn     func(Outcome)
	lim    limits
	ctx    context.Context // of the sends; canceled by a hard stop
	cancel context.CancelFunc

	quit     chan struct{} // closed: start nothing new
	quitOnce sync.Once
	done     chan struct{} // closed when loop has returned
	wake     chan struct{} // signalled when due moves earlier

	mu  sync.Mutex
	due time.Time // earliest next attempt noted since the last pass; zero if none

	run *resumeRun // sends what the passes find due; a pass does not wait for it
}

func (r *resumer) loop() {
	defer close(r.done)
	defer r.t.resumers.remove(r)
	r.run = r.t.newResumeRun(r.ctx, r.lim, r.quit, r.fn, r.note)
	// A host whose queue was full has room: a pass reads its operations.
	r.run.pool.onRoom = func() { r.note(r.t.clock.Now()) }
	defer r.run.pool.close() // waits for the sends in progress
	for {
		next := r.pass()
		if closed(r.quit) || r.ctx.Err() != nil || !r.sleepUntil(next) {
			return
		}
	}
}

// pass runs one Resume pass and returns when the next one is due.
func (r *resumer) pass() time.Time {
	t := r.t
	r.mu.Lock()
	r.due = time.Time{} // this pass sees everything noted so far
	r.mu.Unlock()
	wake := t.clock.Now().Add(t.cfg.ResumeInterval)
	var err error
	r.run.newPass()
	r.run.scan(0, nil, &err) // what it leaves for later is noted
	if err != nil && r.ctx.Err() == nil && !closed(r.quit) {
		if l := t.cfg.Logger; l != nil {
			l.Log(r.ctx, slog.LevelError, "idem: resumer cannot read the journal", "err", err.Error())
		}
		r.report(Outcome{Err: err})
	}
	return wake
}

func (r *resumer) report(out Outcome) {
	if r.fn != nil {
		r.fn(out)
	}
}

// sleepUntil waits until at, or an earlier time noted meanwhile. It returns
// false if the resumer is to stop.
func (r *resumer) sleepUntil(at time.Time) bool {
	for {
		r.mu.Lock()
		if !r.due.IsZero() && r.due.Before(at) {
			at = r.due
		}
		r.mu.Unlock()
		c, stop := r.t.clock.After(max(at.Sub(r.t.clock.Now()), minResumeGap))
		select {
		case <-c:
			return true
		case <-r.wake:
			stop() // due moved earlier: wait again, for less
		case <-r.quit:
			stop()
			return false
		case <-r.ctx.Done():
			stop()
			return false
		}
	}
}

// note tells the resumer that an operation is pending until at.
func (r *resumer) note(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.due.IsZero() || at.Before(r.due) {
		r.due = at
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// beginStop asks the resumer to start nothing new.
func (r *resumer) beginStop() { r.quitOnce.Do(func() { close(r.quit) }) }

// stop stops the resumer gracefully within timeout, then hard, and returns
// once its goroutines have exited.
func (r *resumer) stop(timeout time.Duration) {
	r.beginStop()
	deadline, release := closeAfter(timeout)
	defer release()
	r.finish(deadline)
}

// closeAfter returns a channel closed after d (wall time: a deadline for the
// process, not the retry clock), and a function that releases its timer.
func closeAfter(d time.Duration) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	t := time.AfterFunc(d, func() { close(ch) })
	return ch, func() { t.Stop() }
}

// finish waits for the loop to end, canceling its sends once deadline is
// closed.
func (r *resumer) finish(deadline <-chan struct{}) {
	select {
	case <-r.done:
	case <-deadline:
		r.cancel()
		<-r.done
	}
	r.cancel()
}

// resumerSet is the resumers running on a Transport. Calls that leave an
// operation pending tell them, so they wake when it comes due rather than at
// their next poll.
type resumerSet struct {
	mu sync.Mutex
	m  map[*resumer]struct{}
}

func (s *resumerSet) add(r *resumer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[*resumer]struct{})
	}
	s.m[r] = struct{}{}
}

func (s *resumerSet) remove(r *resumer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, r)
}

func (s *resumerSet) all() []*resumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := make([]*resumer, 0, len(s.m))
	for r := range s.m {
		rs = append(rs, r)
	}
	return rs
}

func (s *resumerSet) notePending(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.m {
		r.note(at)
	}
}
