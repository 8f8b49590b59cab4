// This file holds Pages, the paging a Store's Pending can be built on.

package journal

import (
	"context"
	"iter"
)

// Pages yields the records that page returns, page after page, each page
// asked for with the Seq of the last record of the one before (after, at
// first), until a page holds fewer than size records, ctx ends, or page
// fails; the sequence ends at the first error, which it yields. A Store
// whose page reads at most size pending records above a Seq gets Pending's
// streaming with bounded memory from it.
func Pages(ctx context.Context, after uint64, size int, page func(after uint64) ([]*Record, error)) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		for {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			recs, err := page(after)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, rec := range recs {
				if !yield(rec, nil) {
					return
				}
			}
			if len(recs) < size {
				return
			}
			after = RefOf(recs[len(recs)-1]).Seq
		}
	}
}
