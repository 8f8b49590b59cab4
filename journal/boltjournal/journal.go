// This file holds the Journal: the bbolt file where operations are written
// before they are sent (write-ahead) and kept until settled, expired or
// failed. commit.go writes to it, read.go reads it, bolt.go opens the file,
// and store.go is its journal.Store face.

package boltjournal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var (
	bucketPending = []byte("pending")
	bucketDone    = []byte("done")
	bucketBodies  = []byte("bodies")
	bucketIndex   = []byte("index")
	bucketMeta    = []byte("meta")
	metaVersion   = []byte("version")
	// The file's format version: 10 for a plaintext journal, 11 once opened
	// with Options.Encryption (for good). 8 and 9, the same before records
	// were written in the binary form (record_binary.go); 3 and 4, before
	// bodies were stored in chunks (body.go); 6, sealed before large bodies
	// were sealed in parts (sealSegment); and 5 and 7, before operations
	// were bound to identities (identity.go), are read, and marked 10 or 11
	// when opened for writing, so that an older idem refuses the file
	// rather than fail to read a binary record, miss a chunked body, fail to
	// open a body sealed in parts, or let another identity run a bound
	// operation.
	versionPlain  = []byte("idem-journal-10")
	versionSealed = []byte("idem-journal-11")
	knownVersions = map[string]bool{ // version -> marked as sealed
		"idem-journal-3": false, "idem-journal-4": true, "idem-journal-5": false,
		"idem-journal-6": true, "idem-journal-7": true, "idem-journal-8": false, "idem-journal-9": true,
		string(versionPlain): false, string(versionSealed): true,
	}
)

// openPaths guards against opening one journal twice in a process: bbolt's
// file lock would make the second open wait for itself.
var openPaths sync.Map // absolute path -> struct{}

// Journal is the durable record of operations, a bbolt file opened by one
// process at a time. It is safe for concurrent use. Close it when done: a
// Journal that wrote runs its commits in a goroutine of its own until Close.
type Journal struct {
	db       *bolt.DB
	path     string
	abs      string
	readOnly bool
	keyring  *keyring // Options.Encryption; nil: write plaintext, open nothing sealed
	// sealedFile is set when the file was once opened with Options.Encryption
	// (marked versionSealed, for good) and keyring is nil: no new record is written
	// then (errNeedsKeyring).
	sealedFile bool
	// pageSize is the file's page size, read once at open: bbolt's Info
	// reads the mapping unlocked, which a commit may be remapping.
	pageSize int
	now      func() time.Time
	// identityKey is the HMAC key of credential tags (identity_key.go);
	// nil in a read-only journal of a file written before it existed.
	identityKey []byte

	commit    committer
	retention time.Duration  // for the periodic prune; 0 for read-only
	pruning   sync.WaitGroup // a periodic prune in progress
	// warming is the read of the file that warms the page cache
	// (warmCache); closing stopWarming stops it.
	warming     sync.WaitGroup
	stopWarming chan struct{}
	warmed      atomic.Int64 // bytes it has read
	closeOnce   sync.Once
	closeErr    error
	closed      atomic.Bool // Close began: reads that touch no file say so too

	commits, writeAheads atomic.Uint64
	commitTime           atomic.Int64 // nanoseconds in committed write transactions
	// written is the newest time of a record in the file or given to it,
	// in Unix nanoseconds (written.go).
	written atomic.Int64
	// fileWritten is the newest time the file holds (written.go), rounded
	// up: a commit whose records are older need not write it.
	fileWritten atomic.Int64

	// ops are the operations in flight in this process: every Transport over
	// the journal holds an operation's lock while a call or Resume runs it,
	// and Resolve and Discard refuse one that is held (resolve.go).
	ops journal.Claims
	// changes tells reget that a listed record is unchanged (changes.go).
	changes changeMarks
}

// Open opens or creates the journal file at path (mode 0600) for
// writing. While it is open, finished records older than Options.Retention
// are pruned after a commit, at most once every pruneInterval (10 minutes, or
// a quarter of a Retention under 40 minutes);
// a journal nobody writes to is pruned at its next write or Open. It returns an
// error matching journal.ErrLocked if another process or another Journal in
// this process holds the file (after Options.OpenTimeout), and
// journal.ErrCorrupt if the file is not a readable journal (a *MetaPageError
// if it would open one commit older; io.ErrUnexpectedEOF too if it is
// truncated). It fsyncs the file's directory before it returns. With
// Options.Encryption, records written from now on are sealed under its
// Current key, and records sealed under any of its Keys can be read.
func Open(path string, opts *Options) (*Journal, error) {
	cfg, keys, err := opts.resolved()
	if err != nil {
		return nil, err
	}
	j, err := openJournal(path, cfg.OpenTimeout, false, keys)
	if err != nil {
		return nil, err
	}
	j.retention = cfg.Retention
	j.commit.lastPrune = j.now()
	return j, nil
}

// OpenReadOnly opens an existing journal for inspection. It shares the
// file with other readers but not with a writer: while an application holds
// the journal it returns journal.ErrLocked after timeout (0 means
// DefaultOpenTimeout), and journal.ErrCorrupt as Open does. It has no
// Keyring: sealed records are listed with Record.Sealed set, and Lookup of
// one returns journal.ErrUnknownEncryptionKey.
func OpenReadOnly(path string, timeout time.Duration) (*Journal, error) {
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	return openJournal(path, timeout, true, nil)
}

func openJournal(path string, timeout time.Duration, readOnly bool, keys *keyring) (j *Journal, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("idem: journal %s: %w", path, err)
	}
	if _, busy := openPaths.LoadOrStore(abs, struct{}{}); busy {
		return nil, fmt.Errorf("%w: %s is already open in this process (share one Client)", journal.ErrLocked, path)
	}
	defer func() {
		if err != nil {
			openPaths.Delete(abs)
		}
	}()
	if fi, err := os.Stat(path); err == nil && readOnly && fi.Mode().IsRegular() && fi.Size() == 0 {
		// A writer makes an empty file a new journal; a reader cannot, and
		// bbolt would fail writing to it ("bad file descriptor").
		return nil, &notJournalError{path: path, why: "an empty file"}
	}
	db, err := openBolt(path, timeout, readOnly)
	if err != nil {
		return nil, err
	}
	j = &Journal{db: db, path: path, abs: abs, readOnly: readOnly, keyring: keys, now: time.Now,
		pageSize: db.Info().PageSize, stopWarming: make(chan struct{})}
	j.commit.init()
	j.changes.open()
	if err := j.init(); err != nil {
		db.Close()
		return nil, err
	}
	if !readOnly {
		if err := syncJournalDir(path, abs); err != nil {
			db.Close()
			return nil, err
		}
	}
	j.warmCache()
	return j, nil
}

// init checks the file is a journal, creating the buckets in a new file.
func (j *Journal) init() error {
	check := func(tx *bolt.Tx) error {
		// Every page up to the high-water mark must be in the file; a shorter
		// file was truncated, and reading its missing pages would fault.
		fi, err := os.Stat(j.path)
		if err != nil {
			return fmt.Errorf("idem: journal %s: %w", j.path, err)
		}
		if fi.Size() < tx.Size() {
			return errTruncated(j.path, fi.Size(), tx.Size())
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty || j.readOnly {
				return &notJournalError{path: j.path, why: "a bbolt file without the journal's buckets"}
			}
			return j.create(tx)
		}
		v := meta.Get(metaVersion)
		sealed, known := knownVersions[string(v)]
		if !known {
			return fmt.Errorf("%w: %s has journal version %q", journal.ErrCorrupt, j.path, v)
		}
		// Written to without its Keyring, a sealed journal would take new
		// bodies in plaintext: one forgotten option would put card data on
		// disk. It can still be read, pruned and resumed (insert refuses).
		j.sealedFile = sealed && j.keyring == nil
		want := versionPlain
		if sealed || j.keyring != nil {
			want = versionSealed
		}
		if !j.readOnly && !bytes.Equal(v, want) {
			if err := meta.Put(metaVersion, want); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketPending) == nil || tx.Bucket(bucketDone) == nil || tx.Bucket(bucketBodies) == nil || tx.Bucket(bucketIndex) == nil {
			return fmt.Errorf("%w: %s lacks its buckets", journal.ErrCorrupt, j.path)
		}
		if err := j.loadIdentityKey(meta); err != nil {
			return err
		}
		if err := j.loadWritten(tx); err != nil {
			return err
		}
		if j.readOnly {
			return nil
		}
		return dropStaged(tx)
	}
	if j.readOnly {
		return j.view(check)
	}
	return j.update(check)
}

func (j *Journal) create(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketPending, bucketDone, bucketBodies, bucketIndex} {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	meta, err := tx.CreateBucket(bucketMeta)
	if err != nil {
		return err
	}
	if err := j.loadIdentityKey(meta); err != nil {
		return err
	}
	if j.keyring != nil {
		return meta.Put(metaVersion, versionSealed)
	}
	return meta.Put(metaVersion, versionPlain)
}

// Path returns the path the journal was opened with.
func (j *Journal) Path() string { return j.path }

// Close commits the state changes still deferred, then closes the journal
// file. Requests still in flight through a Transport that uses it fail their
// next journal write with journal.ErrClosed and stay pending in the file. Later
// calls do nothing and return the first one's error.
func (j *Journal) Close() error {
	// Only the first Close releases the path: by a second one, another
	// Journal may hold it.
	j.closeOnce.Do(func() {
		j.closed.Store(true)
		close(j.stopWarming)
		j.warming.Wait()
		j.closeErr = errors.Join(j.closeCommits(), j.db.Close())
		openPaths.Delete(j.abs)
	})
	return j.closeErr
}

// view and update run fn in a transaction, turning a bbolt panic on a damaged
// page into journal.ErrCorrupt and a closed database into journal.ErrClosed.
func (j *Journal) view(fn func(*bolt.Tx) error) error { return j.tx(j.db.View, fn) }
func (j *Journal) update(fn func(*bolt.Tx) error) error {
	start := time.Now()
	err := j.tx(j.db.Update, fn)
	if err == nil {
		j.commits.Add(1)
		j.commitTime.Add(int64(time.Since(start)))
	}
	return err
}

// Stats counts a Journal's writes since it was opened.
type Stats struct {
	Commits     uint64 // fsynced bbolt write transactions committed
	WriteAheads uint64 // records written ahead of their first attempt
	// PagesWritten counts the pages the file's transactions wrote,
	// meta pages included (bbolt's TxStats.Write): the bytes each fsync
	// waits for are about PagesWritten ÷ Commits pages.
	PagesWritten uint64
	// CommitTime is the wall time of those commits, each from the moment it
	// asked for bbolt's writer lock to the return of its last fsync.
	// WriteTime is the time bbolt spent writing the pages of its committed
	// write transactions and fsyncing them (TxStats' WriteTime): the disk's
	// share. The rest of CommitTime is CPU (building each transaction and
	// laying out its pages), and any wait for the writer lock: a prune or a
	// resolve may hold it, the group commit never does.
	CommitTime, WriteTime time.Duration
}

// Stats returns the Journal's counters. It is safe to call at any time.
func (j *Journal) Stats() Stats {
	st := j.db.Stats()
	return Stats{Commits: j.commits.Load(), WriteAheads: j.writeAheads.Load(),
		PagesWritten: uint64(st.TxStats.GetWrite()),
		CommitTime:   time.Duration(j.commitTime.Load()), WriteTime: st.TxStats.GetWriteTime()}
}

func (j *Journal) tx(run func(func(*bolt.Tx) error) error, fn func(*bolt.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %v", journal.ErrCorrupt, j.path, p)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err = run(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %s", journal.ErrClosed, j.path)
	}
	return err
}

// Writable returns nil if new records can be written to j, or says why
// not: it is open read-only, or the file was once opened with
// Options.Encryption and j was not (its records would go to disk in
// plaintext); both match journal.ErrInvalidOptions.
func (j *Journal) Writable() error {
	switch {
	case j.readOnly:
		return fmt.Errorf("%w: %s is open read-only", journal.ErrInvalidOptions, j.path)
	case j.sealedFile:
		return j.errNeedsKeyring()
	}
	return nil
}

// KeepAtLeast raises j's retention (Options.Retention) to d if it is
// shorter: a Transport that assumes the server keeps keys for KeyTTL needs
// settled records kept at least that long, or an operation ID reused after
// pruning would mint a second key while the server may still replay the
// first. A read-only journal prunes nothing and is left as it is.
func (j *Journal) KeepAtLeast(d time.Duration) {
	j.commit.mu.Lock()
	defer j.commit.mu.Unlock()
	if j.retention > 0 && j.retention < d {
		j.retention = d
	}
}
