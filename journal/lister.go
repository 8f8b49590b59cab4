// This file holds Lister, what a Store implements to be inspected whole:
// every operation it holds, finished ones included, read without taking
// anything (idem journal, package journalhttp).

package journal

import (
	"context"
	"iter"
)

// Lister is implemented by a Store that can list every operation it holds,
// in any state, for inspection. Pending lists what a resume may send (in a
// fleet, only what no other instance holds); All lists everything and
// changes nothing.
type Lister interface {
	// All yields every record without its body: the pending ones first,
	// then the finished ones (settled, failed, expired), each group in
	// creation order, a page at a time, so that memory stays bounded
	// however many there are. It reads the newest state, deferred updates
	// included, as Pending does, and changes nothing: it takes no claim or
	// lease, and commits nothing. The sequence ends at the first error,
	// which it yields. A sealed record the Store cannot open is yielded
	// with Sealed set.
	//
	// It need not be one snapshot. On a Store in use, a record that changes
	// state while All runs may be yielded in its old state, its new one or
	// both (once among the pending ones, once among the finished ones); one
	// that stays pending throughout is always yielded, among the pending.
	All(ctx context.Context) iter.Seq2[*Record, error]
}
