// chunked_internal_test.go: every index of a chunked array has its own element, and
// adding never moves the elements before it.

package memstore

import "testing"

func TestChunkedIndexes(t *testing.T) {
	var c chunked[int32]
	var first *int32
	for i := range int32(5000) {
		if j := c.add(); j != i {
			t.Fatalf("add returned %d, want %d", j, i)
		}
		*c.at(i) = i
		if i == 0 {
			first = c.at(0)
		}
	}
	for i := range int32(5000) {
		if got := *c.at(i); got != i {
			t.Fatalf("element %d holds %d", i, got)
		}
	}
	if c.at(0) != first {
		t.Fatal("adding moved element 0")
	}
	if c.len() != 5000 {
		t.Fatalf("len %d, want 5000", c.len())
	}
}
