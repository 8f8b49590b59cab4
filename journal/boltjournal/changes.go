// This file holds the journal's change marks: they tell reget that a record
// a listing read (read.go) has not changed since, so that Resume sends it
// from what the listing read, without reading the file again. Every change
// to what a read of a pending record returns (save, repend, restate) runs
// between begin and end; a commit that only writes a change already made
// visible in memory (deferred.go) needs none.

package boltjournal

import "sync/atomic"

// markSlots is how many slots record IDs share: two records of one slot
// only make reget read the file when it need not.
const markSlots = 1024

// generation counts changes to records in every Journal of the process, so
// that a generation a listing took in one Journal is never current in
// another opened on the same file later.
var generation atomic.Uint64

// changeMarks counts changes to a Journal's records. For each slot of
// record IDs it keeps how many changes are being made and the generation of
// the last one ended. A change is visible to reads before it ends, so a
// record read after generation g was taken is unchanged as long as its slot
// has no change under way and none ended after g. It is safe for concurrent
// use once opened.
type changeMarks struct {
	opened uint64 // the generation when the Journal opened: older reads were not its own
	slots  [markSlots]struct {
		busy atomic.Int32
		last atomic.Uint64
	}
}

// open marks the Journal's start: a record read before it (through another
// Journal, perhaps on a file changed since) is read again.
func (m *changeMarks) open() { m.opened = generation.Add(1) }

// begin marks a change of record id as under way, before it is made.
func (m *changeMarks) begin(id uint64) { m.slots[id%markSlots].busy.Add(1) }

// end marks the change begun for record id as made, once it is visible to
// reads (or failed).
func (m *changeMarks) end(id uint64) {
	s := &m.slots[id%markSlots]
	g := generation.Add(1)
	for {
		last := s.last.Load()
		if last >= g || s.last.CompareAndSwap(last, g) {
			break
		}
	}
	s.busy.Add(-1)
}

// now returns the generation a read takes before it starts.
func (m *changeMarks) now() uint64 { return generation.Load() + 1 }

// unchanged reports whether record id has not changed since a read of this
// Journal that took generation g (now) before it started: no change to a
// record of its slot is under way, and none ended after g. The busy count is
// read first: a change that ends between the two loads has then raised last.
func (m *changeMarks) unchanged(id, g uint64) bool {
	s := &m.slots[id%markSlots]
	return g > m.opened && s.busy.Load() == 0 && s.last.Load() < g
}
