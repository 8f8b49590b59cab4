// chunked.go is the growable array the Store keeps its slots in: chunks that double in
// size, so that adding a record never copies the records before it (a Store of a million
// records would otherwise copy them all each time its slice outgrew its capacity) and
// an element's address never changes.

package memstore

import "math/bits"

// firstChunk is the length of chunks 0 and 1; chunk k > 0 holds firstChunk << (k-1).
const firstChunkBits = 6

// chunked is an array of T in chunks of doubling length: index i lives in chunk
// bits.Len(i >> firstChunkBits). Its zero value is empty and usable.
type chunked[T any] struct {
	chunks [][]T
	n      int32
}

// locate returns the chunk of index i and i's offset in it.
func locate(i int32) (chunk int, off int32) {
	chunk = bits.Len32(uint32(i) >> firstChunkBits)
	if chunk == 0 {
		return 0, i
	}
	return chunk, i &^ (1 << (chunk + firstChunkBits - 1))
}

// at returns the element of index i, which must be below len.
func (c *chunked[T]) at(i int32) *T {
	k, off := locate(i)
	return &c.chunks[k][off]
}

// len returns how many elements c holds.
func (c *chunked[T]) len() int32 { return c.n }

// add appends a zero element and returns its index.
func (c *chunked[T]) add() int32 {
	if k, off := locate(c.n); off == 0 {
		size := 1 << firstChunkBits
		if k > 0 {
			size = 1 << (k + firstChunkBits - 1)
		}
		c.chunks = append(c.chunks, make([]T, size))
	}
	c.n++
	return c.n - 1
}
