// canonjson_alloc_test.go: the cost of canonicalising a body is linear in its size, however
// deeply its objects nest. A body within MaxBodyBytes must not make the server copy it
// once per level of nesting (a 1 MiB body of 999 nested objects around one long string
// cost a gigabyte of allocation).

package server

import (
	"runtime"
	"strings"
	"testing"
)

func TestCanonicalJSONNestedObjectsAllocateLinearly(t *testing.T) {
	const depth = maxDepth - 1
	const size = 1 << 20
	filler := strings.Repeat("x", size-len(`{"b":0,"a":}`)*depth)
	body := []byte(strings.Repeat(`{"b":0,"a":`, depth/2) + strings.Repeat(`{"a":`, depth-depth/2) +
		`"` + filler + `"` + strings.Repeat("}", depth))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := canonicalJSON(body)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(body) || !strings.HasPrefix(string(out), `{"a":{"a":`) {
		t.Fatalf("wrong canonical form: %d bytes from %d, starting %.20q", len(out), len(body), out)
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(32*len(body)); got > limit {
		t.Fatalf("canonicalising a %d-byte body allocated %d MiB, over %d MiB", len(body), got>>20, limit>>20)
	}
}
