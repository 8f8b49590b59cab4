// This file holds how the journal stores request bodies (journal.go holds
// the file and its buckets). A body up to bodyChunk bytes is one value under
// its record's ID; a larger one is cut into chunks under the ID followed by
// the chunk's number; one of stageMin bytes or more is written ahead of its
// record, in several transactions (stageBody).
//
// Why chunks: bbolt rewrites a leaf whole whenever one of its values changes,
// and it never splits a leaf of four values or fewer. Stored whole, large
// bodies share leaves, so writing (or deleting) one 8 MiB body made bbolt
// copy and rewrite its neighbours too: a journal with four large bodies
// pending took six times a new one's size in memory to commit it. In chunks
// of bodyChunk, a commit rewrites at most the few chunks that share a leaf
// with the body it writes or deletes.

package boltjournal

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
// chunks. The chunks' keys are gathered first and deleted one search each:
// a bbolt cursor is not to be moved after a Delete (its Prev does not skip
// a leaf that earlier deletes in the same transaction emptied, and returns
// nil there), so deleting while walking left chunks behind whenever several
// bodies were deleted in one commit.
func deleteBody(bodies *bolt.Bucket, id []byte) error {
	c := bodies.Cursor()
	k, _ := c.Seek(id)
	if bytes.Equal(k, id) {
		return c.Delete() // the key found: the cursor does not move again
	}
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

// A body of stageMin bytes or more is staged: written ahead of its record,
// stageStep bytes per transaction, in chunks of stageChunk(page size) bytes
// (stageBody). Committed in one transaction with its record, a body is
// copied whole into bbolt's pages while the request's own buffer holds it
// too: twice its size at once. Staged, a transaction holds a stageStep's
// worth of pages, and two such chunks with their keys fill one page
// exactly, which bbolt takes from its pool of single pages and puts back
// after the commit, for the next transaction to reuse (pages of larger
// leaves are allocated anew, and stay garbage until collected).
const (
	stageMin  = 1 << 20
	stageStep = 1 << 20
)

// stagedPrefix marks, in the meta bucket, the record ID a body is staged
// under until its record is committed: stagedPrefix+ID -> "". A crash in
// between leaves the mark, and the next writable open drops the body
// (dropStaged).
var stagedPrefix = []byte("staged\x00")

func stagedKey(id []byte) []byte { return append(bytes.Clone(stagedPrefix), id...) }

// stageChunk is the size of a staged body's chunks for a file of pageSize
// pages: two chunks and their 12-byte keys in a leaf (page header 16
// bytes, 16 per element) fill one page. bbolt never puts fewer than two
// values in a leaf it splits, so one chunk per page is not possible.
func stageChunk(pageSize int) int { return (pageSize-16)/2 - 16 - 12 }

// stageBody writes body ahead of its record, under a new record ID, which
// it returns: each part of it (step bytes; the last may be shorter) in a
// transaction of its own, as seal appends it to its first argument (sealed
// on its own, for a sealed record; seal nil stores the part itself). The
// record's commit then writes only its metadata and clears the mark
// (commitBatch). On failure nothing stays staged, or a mark does for the
// next open to clean up.
func (j *Journal) stageBody(body []byte, step int, seal func(dst []byte, i int, part []byte, last bool) ([]byte, error)) (uint64, error) {
	size := stageChunk(j.pageSize)
	var id, sealed []byte // sealed: one buffer for every part, free again once its part is committed
	for i, n := 0, 0; len(body) > 0; i++ {
		part := body[:min(len(body), step)]
		stored := part
		if seal != nil { // here, before the commit: it does no cryptography
			var err error
			if sealed, err = seal(sealed[:0], i, part, len(part) == len(body)); err != nil {
				if id != nil {
					j.unstage(id)
				}
				return 0, err
			}
			stored = sealed
		}
		key := id
		err := j.update(func(tx *bolt.Tx) error {
			if key == nil {
				seq, err := tx.Bucket(bucketPending).NextSequence()
				if err != nil {
					return err
				}
				key = idKey(seq)
				if err := tx.Bucket(bucketMeta).Put(stagedKey(key), nil); err != nil {
					return err
				}
			}
			bodies := tx.Bucket(bucketBodies)
			bodies.FillPercent = appendFill
			for c, p := n, stored; len(p) > 0; c++ {
				chunk := p[:min(len(p), size)]
				if err := bodies.Put(chunkKey(key, c), chunk); err != nil {
					return err
				}
				p = p[len(chunk):]
			}
			return nil
		})
		if err != nil {
			if id != nil {
				j.unstage(id) // else the next open drops it
			}
			return 0, err
		}
		id = key
		n += (len(stored) + size - 1) / size
		body = body[len(part):]
	}
	return binary.BigEndian.Uint64(id), nil
}

// plainStep is how much of a plaintext body stageBody writes per
// transaction: about stageStep, in whole chunks, so that only the last chunk
// of the body is short.
func (j *Journal) plainStep() int {
	size := stageChunk(j.pageSize)
	return max(stageStep/size, 1) * size
}

// unstage deletes a staged body whose record was not committed.
func (j *Journal) unstage(id []byte) error {
	return j.update(func(tx *bolt.Tx) error { return dropStagedTx(tx, id) })
}

func dropStagedTx(tx *bolt.Tx, id []byte) error {
	if err := deleteBody(tx.Bucket(bucketBodies), id); err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Delete(stagedKey(id))
}

// dropStaged deletes the bodies staged for records never committed: the
// process died, or its cleanup failed, in between.
func dropStaged(tx *bolt.Tx) error {
	var ids [][]byte
	meta := tx.Bucket(bucketMeta)
	c := meta.Cursor()
	for k, _ := c.Seek(stagedPrefix); bytes.HasPrefix(k, stagedPrefix); k, _ = c.Next() {
		if meta.Bucket(k) == nil { // a nested bucket is no mark of idem's
			ids = append(ids, bytes.Clone(k[len(stagedPrefix):]))
		}
	}
	for _, id := range ids {
		written := tx.Bucket(bucketPending).Get(id) != nil || tx.Bucket(bucketDone).Get(id) != nil
		if len(id) != 8 || written { // not idem's mark, or not an orphan: keep the body
			if err := tx.Bucket(bucketMeta).Delete(stagedKey(id)); err != nil {
				return err
			}
			continue
		}
		if err := dropStagedTx(tx, id); err != nil {
			return err
		}
	}
	return nil
}
