// shared.go is the timer that many Keepers of one lease length share until their first
// renewal is due: a holder that stops within a third of its lease (most requests) then
// never makes a timer of its own.

package lease

import "sync"

// Shared holds Keepers, in the order their first renewal is due, under one timer of the
// Clock; each gets its own timer when that renewal comes. Keepers share one only if their
// Configs have the same Lease (the order then is that of their starts). It is safe for
// concurrent use. The zero Shared is not usable: call NewShared.
type Shared struct {
	clock Clock

	mu         sync.Mutex
	timer      Timer   // armed for head's renewal while the list is not empty
	head, tail *Keeper // linked by Keeper.prev and Keeper.next
}

// NewShared returns a Shared on clock.
func NewShared(clock Clock) *Shared { return &Shared{clock: clock} }

// add appends k, whose first renewal is due at k.renewAt, and reports whether it could:
// not if that is before the last Keeper's (k's claim was sent earlier: retried or slow),
// which the list's order would make late. Called with k.mu held.
func (s *Shared) add(k *Keeper) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tail != nil && k.renewAt.Before(s.tail.renewAt) {
		return false
	}
	k.shared, k.prev = s, s.tail
	if s.tail == nil {
		s.head = k
		s.arm()
	} else {
		s.tail.next = k
	}
	s.tail = k
	return true
}

// remove takes k out of the list if it is in it. Called with k.mu held.
func (s *Shared) remove(k *Keeper) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k.shared == nil {
		return // taken out by fire already
	}
	s.unlink(k)
}

// unlink takes k out of the list. Called with mu held.
func (s *Shared) unlink(k *Keeper) {
	if k.prev == nil {
		s.head = k.next
	} else {
		k.prev.next = k.next
	}
	if k.next == nil {
		s.tail = k.prev
	} else {
		k.next.prev = k.prev
	}
	k.shared, k.prev, k.next = nil, nil, nil
}

// arm sets the timer for head's renewal. Called with mu held and a head.
func (s *Shared) arm() {
	d := s.head.renewAt.Sub(s.clock.Now())
	if s.timer == nil {
		s.timer = s.clock.AfterFunc(d, s.fire)
		return
	}
	s.timer.Reset(d)
}

// fire is the timer's call: each Keeper whose first renewal is due leaves the list for a
// timer of its own, firing now.
func (s *Shared) fire() {
	var due []*Keeper
	s.mu.Lock()
	now := s.clock.Now()
	for s.head != nil && !now.Before(s.head.renewAt) {
		k := s.head
		s.unlink(k)
		due = append(due, k)
	}
	if s.head != nil {
		s.arm()
	}
	s.mu.Unlock()
	for _, k := range due {
		k.own()
	}
}
