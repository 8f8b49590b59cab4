// This file holds the history of settled operations that nobody can name:
// neither an operation ID nor a caller's key, only a key idem minted. Their
// settle deletes the pending record in the next commit (deferred.go), as
// every settle does, but their settled record is written into the done
// bucket later, many at a time: each commit that appends to that large
// bucket rewrites its last leaf and the branch pages above it, about three
// pages, which at one operation per commit was half of what a commit wrote.
// Nothing looks such a record up (Get finds only named ones), so a crash
// before it is written loses a line of `idem journal ls`, never an
// operation: it had settled.

package boltjournal

import (
	"cmp"
	"time"
)

const (
	// historyDelay bounds how long a settled record waits for its write.
	historyDelay = time.Second
	// historyMax is how many bytes of settled records wait at most: about
	// sixteen leaf pages of the done bucket written together.
	historyMax = 64 << 10
)

// history is the committer's list of settled records owed to the done
// bucket. Its fields are guarded by committer.mu.
type history struct {
	owed    map[uint64]*deferredWrite
	writing map[uint64]*deferredWrite // what the running commit is writing
	bytes   int                       // of owed's data
	since   time.Time                 // when the oldest in owed was settled
	due     bool                      // historyDelay has passed: the next commit writes owed
	timer   *time.Timer
	delay   time.Duration // historyDelay, unless a test sets another
}

// lazySettle reports whether the settle d may leave its done record owed:
// a settled record that no index entry names.
func lazySettle(d *deferredWrite) bool {
	return d.state == StateSettled && !d.named
}

// take hands what is owed to a commit, if it is time to write it: force (a
// flush or Close), historyDelay passed, or historyMax bytes owed.
func (h *history) take(force bool) map[uint64]*deferredWrite {
	if len(h.owed) == 0 || !force && !h.due && h.bytes < historyMax {
		return nil
	}
	h.writing, h.owed = h.owed, nil
	h.bytes, h.due = 0, false
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	return h.writing
}

// owedWrite is a settled record a commit left owed.
type owedWrite struct {
	id uint64
	d  *deferredWrite
}

// holdsAny reports whether a record of changes is owed: a change to it
// must find it in the done bucket.
func (h *history) holdsAny(changes map[uint64]*deferredWrite) bool {
	if len(h.owed) == 0 {
		return false
	}
	for id := range changes {
		if h.owed[id] != nil {
			return true
		}
	}
	return false
}

// committed ends a successful commit's part in the history: it wrote what
// it took, and left owed the settled records in left.
func (h *history) committed(now time.Time, left []owedWrite) {
	for _, o := range left {
		h.add(now, o.id, o.d)
	}
	h.writing = nil
}

// failed ends a failed commit's part: what it was to write is owed again.
func (h *history) failed(now time.Time) {
	for id, d := range h.writing {
		h.add(now, id, d)
	}
	h.writing = nil
}

func (h *history) add(now time.Time, id uint64, d *deferredWrite) {
	if h.owed == nil {
		h.owed = make(map[uint64]*deferredWrite)
		h.since = now
	}
	h.owed[id] = d
	h.bytes += len(d.data)
}

// get returns the settled record id, owed or being written, or nil.
func (h *history) get(id uint64) *deferredWrite {
	if d := h.owed[id]; d != nil {
		return d
	}
	return h.writing[id]
}

// unarmed reports whether records are owed with no timer running for them.
func (h *history) unarmed() bool { return len(h.owed) > 0 && h.timer == nil }

// arm starts the timer that makes the owed records due historyDelay after
// the oldest of them, unless it runs already.
func (h *history) arm(now time.Time, fire func()) {
	if !h.unarmed() {
		return
	}
	h.timer = time.AfterFunc(max(0, cmp.Or(h.delay, historyDelay)-now.Sub(h.since)), fire)
}

// stop stops the timer, for Close.
func (h *history) stop() {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
}

// flushHistory commits the owed settled records once historyDelay passed,
// with the next commit or, when none is running, in one of their own.
func (j *Journal) flushHistory() {
	c := &j.commit
	c.mu.Lock()
	c.history.timer = nil
	if c.closed || len(c.history.owed) == 0 {
		c.mu.Unlock()
		return
	}
	c.history.due = true
	if !c.leading { // else that commit re-arms the timer, and the next one writes them
		j.kickLoop()
	}
	c.mu.Unlock()
}
