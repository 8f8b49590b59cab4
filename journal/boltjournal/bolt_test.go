// Tests for bolt.go and meta.go against damaged and foreign files: whole
// files, truncations and meta pages. Never a panic or a hang: always
// journal.ErrCorrupt naming the path, or a *MetaPageError until the older
// commit is accepted.

package boltjournal

import (
	"bytes"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// journalPageSize returns the page size of the journal file at path.
func journalPageSize(tb testing.TB, path string) int {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(tb, err)
	defer db.Close()
	return db.Info().PageSize
}

// withDeadline runs fn, and ends the test binary with a goroutine dump if
// it does not return within d: a damaged journal must never hang its caller.
func withDeadline(tb testing.TB, d time.Duration, what string, fn func()) {
	tb.Helper()
	watchdog := time.AfterFunc(d, func() {
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		panic(fmt.Sprintf("%s: %s did not return within %v", tb.Name(), what, d))
	})
	defer watchdog.Stop()
	fn()
}

func TestJournalCorruptFiles(t *testing.T) {
	good, hw := goodJournalFile(t)
	require.Greater(t, hw, int64(64<<10), "the sample journal should span many pages")
	random := make([]byte, 64<<10)
	rand.Read(random)

	foreign := func(tb testing.TB, path string) {
		db, err := bolt.Open(path, 0o600, nil)
		require.NoError(tb, err)
		require.NoError(tb, db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("users"))
			if err != nil {
				return err
			}
			return b.Put([]byte("alice"), []byte("admin"))
		}))
		require.NoError(tb, db.Close())
	}
	otherVersion := func(tb testing.TB, path string) {
		j, err := Open(path, nil)
		require.NoError(tb, err)
		require.NoError(tb, j.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaVersion, []byte("idem-journal-99"))
		}))
		require.NoError(tb, j.Close())
	}
	write := func(b []byte) func(testing.TB, string) {
		return func(tb testing.TB, path string) { require.NoError(tb, os.WriteFile(path, b, 0o600)) }
	}
	tests := []struct {
		name string
		make func(tb testing.TB, path string)
	}{
		{"random bytes", write(random)},
		{"a few random bytes", write(random[:100])},
		{"zero-filled", write(make([]byte, 64<<10))},
		{"truncated inside the meta pages", write(good[:6000])},
		{"truncated after the meta pages", write(good[:8193])},
		{"truncated to three pages", write(good[:3*4096])},
		{"truncated to half", write(good[:hw/2])},
		{"truncated by one byte", write(good[:hw-1])},
		{"a bbolt file that is not a journal", foreign},
		{"a journal of another version", otherVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.journal")
			tt.make(t, path)
			for _, open := range []struct {
				name string
				fn   func() (*Journal, error)
			}{
				{"Open", func() (*Journal, error) {
					return Open(path, &Options{OpenTimeout: 200 * time.Millisecond})
				}},
				// Again: a failed open must not keep the file locked.
				{"Open again", func() (*Journal, error) {
					return Open(path, &Options{OpenTimeout: 200 * time.Millisecond})
				}},
				{"OpenReadOnly", func() (*Journal, error) { return OpenReadOnly(path, 200*time.Millisecond) }},
			} {
				j, err := open.fn()
				if j != nil {
					j.Close()
				}
				require.ErrorIs(t, err, journal.ErrCorrupt, open.name)
				require.Contains(t, err.Error(), path, open.name)
			}
		})
	}
}

func TestJournalTruncatedAnywhere(t *testing.T) {
	// Wherever a copy or a full disk cut the file, opening it must report
	// ErrCorrupt: bbolt faults (SIGBUS) on mapped pages past the end of the
	// file, which would otherwise kill the process.
	good, hw := goodJournalFile(t)
	dir := t.TempDir()
	for size := int64(2 * 4096); size < hw; size += 4096 {
		path := filepath.Join(dir, fmt.Sprintf("cut-%d.journal", size))
		require.NoError(t, os.WriteFile(path, good[:size], 0o600))
		j, err := Open(path, &Options{OpenTimeout: 100 * time.Millisecond})
		if j != nil {
			j.Close()
		}
		require.ErrorIs(t, err, journal.ErrCorrupt, "cut at %d of %d bytes", size, hw)
		ro, err := OpenReadOnly(path, 100*time.Millisecond)
		if ro != nil {
			ro.Close()
		}
		require.ErrorIs(t, err, journal.ErrCorrupt, "read-only, cut at %d of %d bytes", size, hw)
	}
}

func TestJournalMetaPagesDamaged(t *testing.T) {
	good, _ := goodJournalFile(t)
	scratch := filepath.Join(t.TempDir(), "probe.journal")
	require.NoError(t, os.WriteFile(scratch, good, 0o600))
	ps := journalPageSize(t, scratch)
	rng := mrand.New(mrand.NewPCG(1, 2))

	// damage returns a copy of good with bytes [from, to) replaced by fill.
	damage := func(from, to int, fill func([]byte)) []byte {
		b := bytes.Clone(good)
		fill(b[from:to])
		return b
	}
	zero := func(b []byte) { clear(b) }
	random := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	headers := bytes.Clone(good) // each meta page's page header and meta fields
	clear(headers[:64])
	clear(headers[ps : ps+64])
	tests := []struct {
		name string
		file []byte
	}{
		{"both meta pages zeroed", damage(0, 2*ps, zero)},
		{"both meta pages random", damage(0, 2*ps, random)},
		{"both meta headers zeroed", headers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.journal")
			require.NoError(t, os.WriteFile(path, tt.file, 0o600))
			withDeadline(t, 10*time.Second, "open", func() {
				j, err := Open(path, &Options{OpenTimeout: 200 * time.Millisecond})
				if j != nil {
					j.Close()
				}
				require.ErrorIs(t, err, journal.ErrCorrupt)
				require.NotErrorIs(t, err, ErrNotJournal, "its data pages hold the journal's buckets")
				require.Contains(t, err.Error(), path)
				ro, err := OpenReadOnly(path, 200*time.Millisecond)
				if ro != nil {
					ro.Close()
				}
				require.ErrorIs(t, err, journal.ErrCorrupt)
				require.NotErrorIs(t, err, ErrNotJournal)
				require.Contains(t, err.Error(), path)
			})
		})
	}

	// bbolt keeps two meta pages and uses the newer valid one: with one of
	// them damaged it would open the file at worst one commit older, so
	// the journal refuses it (meta.go) until the older commit is accepted.
	for i := range 2 {
		t.Run(fmt.Sprintf("meta page %d zeroed", i), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.journal")
			require.NoError(t, os.WriteFile(path, damage(i*ps, (i+1)*ps, zero), 0o600))
			withDeadline(t, 10*time.Second, "open", func() {
				_, err := Open(path, nil)
				var meta *MetaPageError
				require.ErrorAs(t, err, &meta)
				require.Equal(t, i, meta.Page)
				_, err = AcceptOlderCommit(path, 0)
				require.NoError(t, err)
				j, err := Open(path, nil)
				require.NoError(t, err)
				defer j.Close()
				recs, err := j.Records()
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(recs), 59, "at most the last commit is lost")
			})
		})
	}
}
