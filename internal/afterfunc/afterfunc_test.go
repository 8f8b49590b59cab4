package afterfunc

import (
	"sync"
	"testing"
)

// Functions are called once each, in the order registered, unless stopped first; a stop
// after Take reports false, as context.AfterFunc's stop must. Once ended, a function is
// called at once and registers nothing.
func TestFuncs(t *testing.T) {
	var mu sync.Mutex
	var fs Funcs
	ended := false
	isEnded := func() bool { return ended }
	var got []int
	stopA := fs.AfterFunc(&mu, isEnded, func() { got = append(got, 1) })
	stopB := fs.AfterFunc(&mu, isEnded, func() { got = append(got, 2) })
	stopC := fs.AfterFunc(&mu, isEnded, func() { got = append(got, 3) })
	if !stopB() || stopB() {
		t.Fatal("stop: want true once, then false")
	}
	if fs.Len() != 2 {
		t.Fatalf("Len = %d, want 2", fs.Len())
	}
	mu.Lock()
	ended = true
	taken := fs.Take()
	mu.Unlock()
	if fs.Len() != 0 || stopA() || stopC() {
		t.Fatal("after Take: want nothing registered, nothing to stop")
	}
	taken.Call()
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("called %v, want [1 3]", got)
	}

	late := make(chan struct{})
	if stop := fs.AfterFunc(&mu, isEnded, func() { close(late) }); stop() {
		t.Error("registered after the end: stop reported true")
	}
	<-late
	if fs.Len() != 0 {
		t.Fatalf("Len = %d after the end, want 0", fs.Len())
	}
}
