// This file measures the durability floor under the journal, in the journal's
// own directory: one fsync of a fresh 4 KiB append, and one bbolt commit of a
// single small put (bbolt syncs twice per commit: data pages, then meta).

package main

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// spread is the p50 and p99 of n timed operations.
type spread struct {
	n        int
	p50, p99 time.Duration
}

func spreadOf(ds []time.Duration) spread {
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return spread{n: len(ds), p50: at(0.50), p99: at(0.99)}
}

// measureFsync appends n fresh 4 KiB blocks to a new file, timing the
// f.Sync (fsync) after each write.
func measureFsync(dir string, n int) (spread, error) {
	f, err := os.OpenFile(filepath.Join(dir, "fsync.probe"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return spread{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4<<10)
	ds := make([]time.Duration, n)
	for i := range ds {
		rand.Read(buf)
		if _, err := f.WriteAt(buf, int64(i)*int64(len(buf))); err != nil {
			return spread{}, err
		}
		t0 := time.Now()
		if err := f.Sync(); err != nil {
			return spread{}, err
		}
		ds[i] = time.Since(t0)
	}
	return spreadOf(ds), nil
}

// floorPerRound is how many commits each c=1 round times for its floor.
const floorPerRound = 50

// measureBoltCommit times n db.Update transactions of one 200-byte put each,
// back to back, in a scratch bbolt file.
func measureBoltCommit(dir string, n int) (spread, error) {
	f, err := alternate(dir, n, nil)
	return f.commit, err
}

// floorSample is a request path made of a bare bbolt commit and a POST,
// alternating, as a client that commits before each send would run it.
type floorSample struct {
	commit spread // each commit, which follows a POST as idem's does
	// each commit and the POST after it: on the project's VMs an fsync that
	// follows other work takes about twice as long as one that follows
	// another fsync, and a POST that follows an fsync's wait takes longer
	// than one sent back to back, so the floor for idem's request path is
	// measured as that path runs.
	commitThenPost spread
}

// alternate times n commits of one 200-byte put each in a scratch bbolt
// file, each followed by post if it is not nil.
func alternate(dir string, n int, post func() error) (floorSample, error) {
	path := filepath.Join(dir, "scratch.bbolt")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return floorSample{}, err
	}
	defer os.Remove(path)
	defer db.Close()
	bucket := []byte("b")
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		return floorSample{}, err
	}
	if post != nil {
		if err := post(); err != nil { // so that the first commit follows one too
			return floorSample{}, err
		}
	}
	val := make([]byte, 200)
	commits, units := make([]time.Duration, n), make([]time.Duration, 0, n)
	for i := range commits {
		rand.Read(val)
		t0 := time.Now()
		err := db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucket).Put([]byte(strconv.Itoa(i)), val)
		})
		if err != nil {
			return floorSample{}, err
		}
		commits[i] = time.Since(t0)
		if post != nil {
			if err := post(); err != nil {
				return floorSample{}, err
			}
			units = append(units, time.Since(t0))
		}
	}
	f := floorSample{commit: spreadOf(commits)}
	if len(units) > 0 {
		f.commitThenPost = spreadOf(units)
	}
	return f, nil
}
