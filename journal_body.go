// This file holds how the journal stores request bodies (journal.go holds
// the file and its buckets). A body up to bodyChunk bytes is one value under
// its record's ID; a larger one is cut into chunks under the ID followed by
// the chunk's number.
//
// Why chunks: bbolt rewrites a leaf whole whenever one of its values changes,
// and it never splits a leaf of four values or fewer. Stored whole, large
// bodies share leaves, so writing (or deleting) one 8 MiB body made bbolt
// copy and rewrite its neighbours too: a journal with four large bodies
// pending took six times a new one's size in memory to commit it. In chunks
// of bodyChunk, a commit rewrites at most the few chunks that share a leaf
// with the body it writes or deletes.

package idem

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// bodyChunk is the most bytes of a body one bbolt value holds: 64 KiB less
// room for the headers, so that a leaf of one or two chunks fills 16 or 32
// pages exactly (page header 16 bytes, then 16 per element and its 12-byte key).
const bodyChunk = 64<<10 - 64

// chunkKey is the key of a large body's chunk n: the record's ID, then n.
func chunkKey(id []byte, n int) []byte {
	return binary.BigEndian.AppendUint32(bytes.Clone(id), uint32(n))
}

// putBody stores body under the record ID id. bbolt copies each value into
// its pages at commit, so body must stay unchanged until then.
func putBody(bodies *bolt.Bucket, id, body []byte) error {
	if len(body) <= bodyChunk {
		return bodies.Put(id, body)
	}
	for n := 0; len(body) > 0; n++ {
		part := body[:min(len(body), bodyChunk)]
		if err := bodies.Put(chunkKey(id, n), part); err != nil {
			return err
		}
		body = body[len(part):]
	}
	return nil
}

// getBody returns the body stored under the record ID id, nil if none, as a
// copy the caller owns (not the transaction's memory).
func getBody(bodies *bolt.Bucket, id []byte) []byte {
	if v := bodies.Get(id); v != nil {
		return bytes.Clone(v)
	}
	size := 0
	c := bodies.Cursor()
	for k, v := c.Seek(id); isChunk(k, id); k, v = c.Next() {
		size += len(v)
	}
	if size == 0 {
		return nil
	}
	body := make([]byte, 0, size)
	for k, v := c.Seek(id); isChunk(k, id); k, v = c.Next() {
		body = append(body, v...)
	}
	return body
}

// deleteBody deletes the body stored under the record ID id, whole or in
// chunks, with one search either way.
func deleteBody(bodies *bolt.Bucket, id []byte) error {
	c := bodies.Cursor()
	k, _ := c.Seek(id)
	if bytes.Equal(k, id) {
		return c.Delete()
	}
	// Collected first: a bbolt cursor skips an entry after a Delete.
	var keys [][]byte
	for ; isChunk(k, id); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := bodies.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// isChunk says whether k is a chunk key of the record ID id.
func isChunk(k, id []byte) bool {
	return len(k) == len(id)+4 && bytes.HasPrefix(k, id)
}
