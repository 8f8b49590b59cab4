package afterfunc

import "testing"

// Functions are called once each, in the order registered, unless removed first; a
// removal after Take reports false, as context.AfterFunc's stop must.
func TestFuncs(t *testing.T) {
	var fs Funcs
	var got []int
	a := fs.Add(func() { got = append(got, 1) })
	b := fs.Add(func() { got = append(got, 2) })
	c := fs.Add(func() { got = append(got, 3) })
	if !fs.Remove(b) || fs.Remove(b) {
		t.Fatal("Remove: want true once, then false")
	}
	if fs.Len() != 2 {
		t.Fatalf("Len = %d, want 2", fs.Len())
	}
	taken := fs.Take()
	if fs.Len() != 0 || fs.Remove(a) || fs.Remove(c) {
		t.Fatal("after Take: want nothing registered, nothing to remove")
	}
	taken.Call()
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("called %v, want [1 3]", got)
	}
}
