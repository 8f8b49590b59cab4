// This file holds a listing that a caller steers record by record: Resume
// passes over the records of a host whose queue is full without having
// them built, and stops once it has what it has room for.

package journal

import (
	"context"
	"iter"
)

// Pick is what a picked listing does with the next pending record.
type Pick uint8

const (
	Take Pick = iota // build the record and yield it
	Skip             // pass over it
	Stop             // end the listing before it
)

// Picker is implemented by a Store that can judge a pending record by its
// target before it builds it, so that a listing that passes over most of
// its records costs little more than reading their keys. Picked uses it
// when a Store has it.
type Picker interface {
	// PendingPicked is Pending, asking pick about each record before it is
	// built: seq is its Ref's Seq, target its Record.Target (in a record
	// whose request is sealed, its part before the query), memory valid
	// only during the call. A record pick Skips is not yielded, and Stop
	// ends the sequence. The Store may yield a record without asking (one
	// whose target it cannot read without building it). pick must not
	// call the Store.
	PendingPicked(ctx context.Context, after uint64, pick func(seq uint64, target []byte) Pick) iter.Seq2[*Record, error]
}

// Picked is s's pending records from the first past after, asking pick
// about each: through s's PendingPicked if s is a Picker, else over
// Pending, each record once built. A Picker may yield a record without
// asking: what pick decides is a saving, never the rule.
func Picked(ctx context.Context, s Store, after uint64, pick func(seq uint64, target []byte) Pick) iter.Seq2[*Record, error] {
	if p, ok := s.(Picker); ok {
		return p.PendingPicked(ctx, after, pick)
	}
	return func(yield func(*Record, error) bool) {
		for rec, err := range s.Pending(ctx, after) {
			if err == nil {
				switch pick(RefOf(rec).Seq, []byte(rec.Target())) {
				case Skip:
					continue
				case Stop:
					return
				}
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}
