// This file holds a resume run: the scans over the journal's pending records
// that Resume and the background resumer make, and the send of each due
// operation through a fairPool.

package idem

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/journal"
)

// resumePage is how many pending records a scan queues before it starts
// sending: the fair pool's per-host queue, and its batch.
const resumePage = 256

// resumeRun sends due pending operations and reports each outcome. Resume
// makes one per call; a background resumer keeps one for its life, and its
// passes feed the same pool.
type resumeRun struct {
	t     *Transport
	ctx   context.Context
	lim   limits
	stop  <-chan struct{} // closed: send nothing more; nil for Resume
	fn    func(Outcome)
	later func(time.Time) // an operation to send later, at that time
	pool  *fairPool

	reportMu sync.Mutex // serialises fn
	// deniedHosts are the hosts whose budget held an operation back in this
	// pass: their other operations wait for the next pass, unreported.
	deniedMu    sync.Mutex
	deniedHosts map[string]bool
	// denied and answered, both set, mean the budget is filling again: a
	// pass soon after sends more.
	denied, answered atomic.Bool
}

func (t *Transport) newResumeRun(ctx context.Context, lim limits, stop <-chan struct{}, fn func(Outcome), later func(time.Time)) *resumeRun {
	r := &resumeRun{t: t, ctx: ctx, lim: lim, stop: stop, fn: fn, later: later, deniedHosts: map[string]bool{}}
	r.pool = newFairPool(t.cfg.ResumeConcurrency, resumePage, r.send)
	r.lim.yield = nil // set per host in send
	return r
}

// all is Resume: one pass over the journal, then passes over what it left
// out (full host queues, or all past where a full pool stopped it) until
// every due record was queued; it returns once all have been sent.
func (r *resumeRun) all() error {
	var err error
	left := r.scan(0, nil, &err)
	for !left.empty() && err == nil && r.waitRoom(left) {
		left = r.scan(left.from()-1, left, &err)
	}
	r.pool.wait()
	return err
}

// pending is the journal's pending records from the first past after, less
// those pick passes over (journal.Picked); a read error ends it and is
// stored in *errp.
func (r *resumeRun) pending(after uint64, pick func(uint64, []byte) journal.Pick, errp *error) iter.Seq[*Record] {
	return func(yield func(*Record) bool) {
		for rec, err := range journal.Picked(r.ctx, r.t.journal, after, pick) {
			if err != nil {
				*errp = err
				return
			}
			if !yield(rec) {
				return
			}
		}
	}
}

// leftOut is what a scan left out, to be read again: for each host whose
// queue was full, its first record left out (the host's later ones were
// skipped, to keep its operations in order); and once the pool was full,
// the ID at which the scan stopped, from which every other host's records
// are still to read (0: none).
type leftOut struct {
	hosts map[string]uint64
	rest  uint64
}

func (l *leftOut) empty() bool { return l == nil || (len(l.hosts) == 0 && l.rest == 0) }

// from returns the lowest ID left out.
func (l *leftOut) from() uint64 {
	from := l.rest
	for _, id := range l.hosts {
		if from == 0 || id < from {
			from = id
		}
	}
	return from
}

// takes reports whether a scan that reads again what l left out takes rec
// of host.
func (l *leftOut) takes(host string, id uint64) bool {
	from, ok := l.hosts[host]
	if !ok {
		from, ok = l.rest, l.rest != 0
	}
	return ok && id >= from
}

// holdsAll reports whether l leaves out every host only does.
func (l *leftOut) holdsAll(only *leftOut) bool {
	if len(l.hosts) < len(only.hosts) {
		return false
	}
	for h := range only.hosts {
		if _, ok := l.hosts[h]; !ok {
			return false
		}
	}
	return true
}

// hold notes that host's records from id on are left out, unless an earlier
// one of host's is already.
func (l *leftOut) hold(host string, id uint64) {
	if l.hosts == nil {
		l.hosts = map[string]uint64{}
	}
	if from, ok := l.hosts[host]; !ok || id < from {
		l.hosts[host] = id
	}
}

// scan queues the due records past after and starts their sends; it notes
// when the others come due. With only set, it takes only the records only
// left out. It returns what it left out itself: records of hosts whose
// queue was full, or all past the one the full pool refused. A read error
// ends it and is stored in *errp.
func (r *resumeRun) scan(after uint64, only *leftOut, errp *error) *leftOut {
	t := r.t
	left := &leftOut{}
	refused := 0 // hosts of only.hosts left out again
	added := 0
	hosts := originHosts{}
	for rec := range r.pending(after, r.picker(left, only), errp) {
		if r.ctx.Err() != nil || closed(r.stop) {
			break
		}
		host := hosts.record(rec)
		if only != nil && !only.takes(host, seqOf(rec)) {
			continue
		}
		if from, ok := left.hosts[host]; ok && seqOf(rec) >= from {
			continue // keep each host's operations in order
		}
		// Past KeyTTL it is due at once, whatever the server asked: it is
		// never sent again, only reported expired (see resume).
		if due, now := t.dueAt(rec); now.Before(due) {
			r.later(due)
			continue
		}
		if r.isDenied(host) {
			continue
		}
		res := r.pool.add(host, rec)
		if res.evicted != nil {
			left.hold(res.evictedHost, seqOf(res.evicted))
		}
		if res.poolFull {
			// The records past this one are read again once the pool has
			// room; a host whose first record is further on keeps its place.
			left.rest = seqOf(rec)
			if only != nil {
				for h, from := range only.hosts {
					if from > seqOf(rec) {
						left.hold(h, from)
					}
				}
			}
			break
		}
		if !res.ok {
			left.hold(host, seqOf(rec))
			if only != nil && only.rest == 0 {
				if _, ok := only.hosts[host]; ok {
					if refused++; refused == len(only.hosts) {
						break // every host read again is full again
					}
				}
			}
			continue
		}
		// Start sending a page at a time: the hosts of a whole page are
		// known before the slots are given out.
		if added++; added%resumePage == 0 {
			r.pool.pump()
		}
	}
	r.pool.pump()
	return left
}

// waitRoom waits until a host whose records left left out has room again,
// or the pool, if it was full. It returns false if the run is to stop.
func (r *resumeRun) waitRoom(left *leftOut) bool {
	for host := range left.hosts {
		if r.pool.hold(host) {
			return true
		}
	}
	select {
	case <-r.pool.room:
		return true
	case <-r.ctx.Done():
		return false
	case <-r.stop:
		return false
	}
}

func (r *resumeRun) isDenied(host string) bool {
	r.deniedMu.Lock()
	defer r.deniedMu.Unlock()
	return r.deniedHosts[host]
}

// newPass starts a pass of a background resumer: hosts denied in the last
// one are tried again.
func (r *resumeRun) newPass() {
	r.deniedMu.Lock()
	defer r.deniedMu.Unlock()
	clear(r.deniedHosts)
}

func (r *resumeRun) report(out Outcome) {
	r.reportMu.Lock()
	defer r.reportMu.Unlock()
	switch {
	case r.fn != nil:
		r.fn(out)
	case out.Response != nil:
		out.Response.Body.Close()
	}
}

// send sends one queued operation, or expires it, and reports the outcome.
func (r *resumeRun) send(host string, rec *Record) {
	t := r.t
	if r.ctx.Err() != nil || closed(r.stop) {
		return
	}
	name := journal.NameOf(rec)
	if !t.journal.TryClaim(name) {
		return // in flight in this process
	}
	defer t.journal.Release(name)
	// Re-sending an operation already attempted is a retry, which needs a
	// budget token; one past KeyTTL is only marked expired, nothing sent.
	isRetry := rec.Attempts > 0 && !t.keyExpired(rec)
	var g grant
	if isRetry {
		r.deniedMu.Lock()
		if r.deniedHosts[host] {
			r.deniedMu.Unlock()
			return
		}
		if g = t.budget.take(host, t.clock.Now()); !g.ok {
			r.deniedHosts[host] = true
			r.deniedMu.Unlock()
			r.pool.drop(host)
			r.setFlag(&r.denied)
			r.report(Outcome{Record: rec, Err: t.resumeDenied(r.ctx, rec, host)})
			return
		}
		r.deniedMu.Unlock()
	}
	lim := r.lim
	lim.yield = func() bool { return r.pool.yield(host) }
	resp, err := t.resume(r.ctx, rec, lim, isRetry)
	if isRetry && resp == nil && !errors.As(err, new(*PendingError)) {
		t.budget.undo(host, g) // not sent after all
	}
	switch {
	case errors.Is(err, errNotPending):
		return
	case errors.Is(err, errNotDue):
		due, _ := t.dueAt(rec)
		r.later(due)
		return
	}
	if resp != nil {
		r.setFlag(&r.answered)
	}
	t.crash(crashResume)
	if err != nil {
		var pe *PendingError // declared here: it escapes, and most sends end without an error
		if errors.As(err, &pe) {
			r.later(pe.NextAttempt)
		}
	}
	r.report(Outcome{Record: rec, Response: resp, Err: err})
}

// setFlag sets denied or answered; once both are, a pass soon after sends
// what the budget held back.
func (r *resumeRun) setFlag(f *atomic.Bool) {
	f.Store(true)
	if r.denied.Load() && r.answered.Load() {
		r.later(r.t.clock.Now().Add(probeEvery))
	}
}
