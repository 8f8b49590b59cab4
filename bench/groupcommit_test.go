package main

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// A put returns its own commit's outcome, only after that commit; a settle
// rides the next commit; take hands out at most max puts; Close commits
// what is left, forced.
func TestGroupCommitter(t *testing.T) {
	errCommit := errors.New("the commit failed")
	taken, gate := make(chan []int, 4), make(chan struct{})
	var forced []bool
	var g *groupCommitter[int, string]
	var settled []string
	g = newGroupCommitter[int, string](time.Hour, time.Hour, func(force bool) {
		forced = append(forced, force)
		for {
			puts, settles, more := g.take(2)
			settled = append(settled, settles...)
			if len(puts) == 0 {
				return
			}
			ps := make([]int, len(puts))
			for i, p := range puts {
				ps[i] = p.p
			}
			taken <- ps
			<-gate
			release(puts, errCommit)
			if !more {
				return
			}
		}
	})
	g.settle("a")
	returned := make(chan error, 1)
	go func() { returned <- g.put(1) }()
	if got := <-taken; !slices.Equal(got, []int{1}) {
		t.Errorf("the commit took %v, want [1]", got)
	}
	select {
	case err := <-returned:
		t.Fatalf("put returned %v before its commit did", err)
	default:
	}
	close(gate)
	if err := <-returned; !errors.Is(err, errCommit) {
		t.Errorf("put returned %v, want its commit's error", err)
	}
	g.Close()
	g.Close()
	if !slices.Equal(settled, []string{"a"}) {
		t.Errorf("settled %v, want [a] with the put's commit", settled)
	}
	if len(forced) == 0 || !forced[len(forced)-1] {
		t.Errorf("commits forced %v, want the last forced (Close)", forced)
	}
}
