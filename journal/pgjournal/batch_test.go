// Tests of the group shape itself (batch.go), without a database: which
// calls a batch takes, every call answered once, and a caller whose ctx
// ends.

package pgjournal

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// TestGroupNextBoundsAndKeys: a batch takes calls in queue order, at most
// max, none whose key is already in it; the rest stay queued in order.
func TestGroupNextBoundsAndKeys(t *testing.T) {
	queue := func(ins ...int) []*call[int, int] {
		q := make([]*call[int, int], len(ins))
		for i, in := range ins {
			q[i] = &call[int, int]{in: in}
		}
		return q
	}
	ins := func(q []*call[int, int]) []int {
		out := make([]int, len(q))
		for i, c := range q {
			out[i] = c.in
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		key        func(*int) int
		queue      []int
		batch, out []int
	}{
		{"no key: the first max", nil, []int{1, 1, 2, 3, 4}, []int{1, 1, 2}, []int{3, 4}},
		{"key: a repeat waits", func(p *int) int { return *p % 10 }, []int{1, 11, 2, 12, 3, 4}, []int{1, 2, 3}, []int{11, 12, 4}},
		{"key: fewer than max", func(p *int) int { return *p }, []int{5, 5}, []int{5}, []int{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g group[int, int, int]
			g.setup(3, false, tc.key, nil)
			g.queue = queue(tc.queue...)
			if got := ins(g.next()); !slices.Equal(got, tc.batch) {
				t.Errorf("batch %v, want %v", got, tc.batch)
			}
			if got := ins(g.queue); !slices.Equal(got, tc.out) {
				t.Errorf("left %v, want %v", got, tc.out)
			}
		})
	}
}

// TestGroupAnswersEveryCall: calls from many goroutines, inline or not,
// each get their own answer, from batches within the bound and without a
// repeated key.
func TestGroupAnswersEveryCall(t *testing.T) {
	for _, inline := range []bool{false, true} {
		var g group[int, int, int]
		var mu sync.Mutex
		var bad []string
		g.setup(7, inline, func(p *int) int { return *p % 5 }, func(batch []*call[int, int]) {
			seen := map[int]bool{}
			for _, c := range batch {
				mu.Lock()
				if len(batch) > 7 || seen[c.in%5] {
					bad = append(bad, "batch over its bound or with a repeated key")
				}
				mu.Unlock()
				seen[c.in%5] = true
				c.answer(-c.in)
			}
		})
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				if r, ok := g.do(context.Background(), i); !ok || r != -i {
					mu.Lock()
					bad = append(bad, "a call got another's answer")
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(bad) > 0 {
			t.Errorf("inline %v: %v", inline, bad[0])
		}
	}
}

// TestGroupCallerGivesUp: a caller whose ctx ends returns at once, not ok;
// the batch it was in still ends (its answer does not block the leader),
// and the group serves the next call.
func TestGroupCallerGivesUp(t *testing.T) {
	var g group[int, struct{}, int]
	gate := make(chan struct{})
	g.setup(4, false, nil, func(batch []*call[int, int]) {
		<-gate
		for _, c := range batch {
			c.answer(c.in)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r, ok := g.do(ctx, 1); ok {
		t.Fatalf("do with an ended ctx: %d, ok", r)
	}
	close(gate) // the leader answers the call nobody waits for
	if r, ok := g.do(context.Background(), 2); !ok || r != 2 {
		t.Fatalf("the next call: %d, %v; want 2, true", r, ok)
	}
}
