// expiry.go holds the Store's expiry queue: the deadlines of its records and released
// tokens in a min-heap, so that each claim deletes the few that have passed, in deadline
// order, and no claim walks every record under the Store's lock.

package memstore

import (
	"time"

	"github.com/idem-go/idem/server"
)

// deadline is when a record, or a released token (rec nil), may be deleted, as queued. A
// record whose expiry moved later since (a renewal, its completion) is queued again then.
type deadline struct {
	at    time.Time
	scope server.Scope
	rec   *record
	token string // the released token, when rec is nil
}

// expireBatch bounds what one claim deletes. Each claim queues one deadline and each
// record is queued again at most once per change of its expiry, so a batch of a few keeps
// the queue level with the clock while no claim does more than a few deletions.
const expireBatch = 4

// queue records r's expiry, or a released token's (r nil), under the lock.
func (s *Store) queue(d deadline) {
	s.deadlines = append(s.deadlines, d)
	s.up(len(s.deadlines) - 1)
}

// expire deletes, under the lock, up to expireBatch records and released tokens whose
// deadline passed at now. A record replaced or released since it was queued is not this
// entry's to delete.
func (s *Store) expire(now time.Time) {
	for range expireBatch {
		if len(s.deadlines) == 0 || now.Before(s.deadlines[0].at) {
			return
		}
		d := s.pop()
		switch {
		case d.rec == nil:
			s.expireToken(d, now)
		case s.records[d.scope] != d.rec:
		case now.Before(d.rec.expires):
			s.queue(deadline{at: d.rec.expires, scope: d.scope, rec: d.rec})
		default:
			delete(s.records, d.scope)
		}
	}
}

// expireToken forgets a released token whose time passed, or queues it again if it was
// released again since.
func (s *Store) expireToken(d deadline, now time.Time) {
	tokens := s.released[d.scope]
	until, ok := tokens[d.token]
	switch {
	case !ok:
	case now.Before(until):
		s.queue(deadline{at: until, scope: d.scope, token: d.token})
	default:
		delete(tokens, d.token)
		if len(tokens) == 0 {
			delete(s.released, d.scope)
		}
	}
}

// pop removes and returns the earliest deadline.
func (s *Store) pop() deadline {
	h := s.deadlines
	d := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = deadline{} // let the record go
	s.deadlines = h[:last]
	s.down(0)
	return d
}

func (s *Store) up(i int) {
	h := s.deadlines
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].at.Before(h[p].at) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (s *Store) down(i int) {
	h := s.deadlines
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].at.Before(h[c].at) {
			c++
		}
		if !h[c].at.Before(h[i].at) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
