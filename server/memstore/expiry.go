// expiry.go holds the Store's expiry queues: the deadlines of its records in a
// pointer-free min-heap, and those of its released tokens in a first-in first-out queue
// (each is kept the same ReleasedTokenTTL), so that each claim deletes the few that have
// passed, in deadline order, and no claim walks every record under the Store's lock.

package memstore

// deadline is when the record in a slot may be deleted, as queued. A record whose expiry
// moved later since (a renewal, its completion) is queued again then; one deleted since
// (its slot freed, so its generation moved on) is not this entry's to delete.
type deadline struct {
	at   int64
	slot int32
	gen  uint32
}

// tokenDeadline is when a released token may be forgotten, as queued: key is its key in
// Store.released.
type tokenDeadline struct {
	at  int64
	key string
}

// expireBatch bounds what one claim deletes from each queue. Each claim queues at most one
// deadline and each record or token is queued again at most once per change of its
// deadline, so a batch of a few keeps the queues level with the clock while no claim does
// more than a few deletions.
const expireBatch = 4

// queue records the expiry of the record in slot i, under the lock.
func (s *Store) queue(i int32) {
	s.deadlines = append(s.deadlines, deadline{at: s.slots.at(i).expires, slot: i, gen: s.slots.at(i).gen})
	s.up(len(s.deadlines) - 1)
}

// expire deletes, under the lock, up to expireBatch records and as many released tokens
// whose deadline passed at now.
func (s *Store) expire(now int64) {
	for range expireBatch {
		if len(s.deadlines) == 0 || now < s.deadlines[0].at {
			break
		}
		d := s.pop()
		switch sl := s.slots.at(d.slot); {
		case !sl.used || sl.gen != d.gen:
		case now < sl.expires:
			s.queue(d.slot)
		default:
			s.remove(d.slot)
		}
	}
	for range expireBatch {
		if s.tokenHead == len(s.tokenQueue) || now < s.tokenQueue[s.tokenHead].at {
			break
		}
		d := s.tokenQueue[s.tokenHead]
		s.tokenQueue[s.tokenHead] = tokenDeadline{}
		s.tokenHead++
		switch until, ok := s.released[d.key]; {
		case !ok:
		case now < until: // released again since
			s.tokenQueue = append(s.tokenQueue, tokenDeadline{at: until, key: d.key})
		default:
			delete(s.released, d.key)
		}
	}
	if s.tokenHead > 0 && s.tokenHead >= len(s.tokenQueue)/2 {
		// Move the live tail to the front, so that the slice does not grow without end.
		n := copy(s.tokenQueue, s.tokenQueue[s.tokenHead:])
		clear(s.tokenQueue[n:])
		s.tokenQueue, s.tokenHead = s.tokenQueue[:n], 0
	}
}

// pop removes and returns the earliest record deadline.
func (s *Store) pop() deadline {
	h := s.deadlines
	d := h[0]
	last := len(h) - 1
	h[0] = h[last]
	s.deadlines = h[:last]
	s.down(0)
	return d
}

func (s *Store) up(i int) {
	h := s.deadlines
	for i > 0 {
		p := (i - 1) / 2
		if h[i].at >= h[p].at {
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
		if c+1 < len(h) && h[c+1].at < h[c].at {
			c++
		}
		if h[c].at >= h[i].at {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
