// This file reads bbolt's two meta pages before bbolt does (journal.go opens
// the file), with the file locked as bbolt locks it (flock_unix.go). bbolt
// writes each commit's meta page over the older of the two and, when one of
// them does not validate, opens the other without a word: one commit older.
// That commit may lack the write-ahead of an operation the server has
// already received, which would then vanish. So a journal with one damaged
// meta page is refused (MetaPageError) until an operator accepts the older
// commit on purpose (AcceptOlderCommit). The same read refuses a truncated
// file before bbolt faults on pages past its end.
//
// A torn meta write (power lost during a commit's last write) looks the same
// as a page damaged later. The torn commit never returned, so nothing it held
// was acted on, and accepting the older commit is then safe; a page damaged
// after its commit returned may hide an operation already sent. idem cannot
// tell the two apart from the file, so it refuses both.

package boltjournal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// MetaPageError is returned, matching journal.ErrCorrupt, by Open,
// Open and OpenReadOnly when one of the journal file's two
// bbolt meta pages is damaged and the other is intact. bbolt would open the
// intact one: the file as of commit Commit, which may be one commit older
// than the newest, and that commit may have written ahead an operation the
// server has already received. Reconcile what the server holds against the
// journal's records (the operations of the last moments before the damage),
// then call AcceptOlderCommit (or run "idem journal accept-older FILE") to
// open the file as of Commit from then on.
type MetaPageError struct {
	Path   string
	Page   int    // the damaged meta page: 0 or 1
	Commit uint64 // the bbolt transaction ID the intact page names
	// Err says what is wrong with the page: bbolt's errors.ErrInvalid (not a
	// meta page), errors.ErrVersionMismatch or errors.ErrChecksum, or the
	// error reading it.
	Err error
}

func (e *MetaPageError) Error() string {
	return fmt.Sprintf("%v: %s: meta page %d is damaged (%v): the file would open as of commit %d from page %d, "+
		"and the newest commit may be lost; reconcile, then accept the older commit (idem journal accept-older)",
		journal.ErrCorrupt, e.Path, e.Page, e.Err, e.Commit, 1-e.Page)
}

// Unwrap returns journal.ErrCorrupt and Err.
func (e *MetaPageError) Unwrap() []error { return []error{journal.ErrCorrupt, e.Err} }

// AcceptOlderCommit makes the journal at path open as of the commit its
// intact meta page names, when the other is damaged (see MetaPageError): it
// opens the file for writing, which bbolt does from the intact page, and
// commits once, which writes a new meta page over the damaged one. It
// returns the damage it accepted, or nil if both meta pages were intact
// (then the file is left unchanged). It needs the file to itself: it returns
// an error matching journal.ErrLocked while another process or Journal holds
// it (after timeout; 0 means DefaultOpenTimeout), and journal.ErrCorrupt if
// the file is damaged otherwise. What the lost commit wrote is gone for good:
// reconcile before calling it.
func AcceptOlderCommit(path string, timeout time.Duration) (*MetaPageError, error) {
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("idem: journal %s: %w", path, err)
	}
	if _, busy := openPaths.LoadOrStore(abs, struct{}{}); busy {
		return nil, fmt.Errorf("%w: %s is already open in this process", journal.ErrLocked, path)
	}
	defer openPaths.Delete(abs)
	var damage *MetaPageError
	db, err := openBoltWith(path, timeout, false, func(f *os.File) error {
		err := checkMeta(path, f)
		if errors.As(err, &damage) {
			return nil // bbolt opens the intact page
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if damage == nil {
		return nil, db.Close()
	}
	err = db.Update(func(*bolt.Tx) error { return nil })
	return damage, errors.Join(err, db.Close())
}

// The layout of a bbolt meta page (go.etcd.io/bbolt internal/common, page.go
// and meta.go), in the machine's byte order: a 16-byte page header, then
// magic, version, page size, flags (4 bytes each), the root bucket (root
// page, sequence), the freelist page, the high-water mark (pages in use),
// the transaction ID and an FNV-64a checksum of the 56 bytes before it (8
// bytes each).
const (
	metaOffset   = 16
	metaLen      = 64
	metaSumLen   = 56
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
	metaMaxShift = 14 // bbolt looks for page 1 at 1 KiB << 0..14
)

// metaPage is what a meta page says, and err why it is not valid (nil if
// it is).
type metaPage struct {
	pageSize uint32
	pages    uint64 // the high-water mark
	txid     uint64
	err      error
}

// readMeta reads the meta page at offset off of f.
func readMeta(f *os.File, off int64) metaPage {
	var b [metaOffset + metaLen]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // past the end: the file is too short
		}
		return metaPage{err: err}
	}
	m, ne := b[metaOffset:], binary.NativeEndian
	p := metaPage{pageSize: ne.Uint32(m[8:]), pages: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:])}
	h := fnv.New64a()
	h.Write(m[:metaSumLen])
	switch {
	case ne.Uint32(m[0:]) != boltMagic:
		p.err = berrors.ErrInvalid
	case ne.Uint32(m[4:]) != boltVersion:
		p.err = berrors.ErrVersionMismatch
	case h.Sum64() != ne.Uint64(m[metaSumLen:]):
		p.err = berrors.ErrChecksum
	}
	return p
}

// checkMeta reads the two meta pages of the journal file f, locked, before
// bbolt does, and refuses (journal.ErrCorrupt) a file whose pages the newer
// valid meta page says are not all there, a file with neither meta page
// valid (ErrNotJournal too, unless it starts with bbolt's magic number or
// its data pages hold idem's buckets), and a file with one of them damaged
// (*MetaPageError) unless the intact one is from the file's creation (commit
// 0 or 1): then the damaged one held at most the commit that created the
// journal's buckets, and no operation is lost. An empty file is a new
// journal.
func checkMeta(path string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("idem: journal %s: %w", path, err)
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	var m [2]metaPage
	m[0] = readMeta(f, 0)
	pageSize := int64(m[0].pageSize)
	if m[0].err != nil {
		// Page 1 is one page in, and the page size is in page 0: look for a
		// meta page that names its own offset as the page size.
		pageSize = 0
		m[1] = metaPage{err: berrors.ErrInvalid}
		for i := range metaMaxShift + 1 {
			off := int64(1024) << i
			if p := readMeta(f, off); p.err == nil && int64(p.pageSize) == off {
				m[1], pageSize = p, off
				break
			}
		}
	} else {
		m[1] = readMeta(f, pageSize)
	}
	if m[0].err != nil && m[1].err != nil {
		if size < metaOffset+4 { // not even bbolt's magic number fits
			return &notJournalError{path: path, why: fmt.Sprintf("%d bytes: too short to be one, or truncated", size), err: io.ErrUnexpectedEOF}
		}
		// With both meta pages gone, idem's buckets in the data pages are
		// what still tells a journal from another file (notjournal.go).
		if p, ok := findJournalBuckets(f); ok {
			return errMetasLost(path, m, p)
		}
		if !hasBoltMagic(f) {
			return &notJournalError{path: path, why: "no bbolt meta page at its start"}
		}
		return fmt.Errorf("%w: %s: neither meta page is valid (page 0: %w; page 1: %w)", journal.ErrCorrupt, path, m[0].err, m[1].err)
	}
	newer, damaged := 0, -1
	switch {
	case m[0].err != nil:
		newer, damaged = 1, 0
	case m[1].err != nil:
		damaged = 1
	case m[1].txid > m[0].txid:
		newer = 1
	}
	if need := int64(m[newer].pages) * pageSize; size < need {
		return errTruncated(path, size, need)
	}
	if damaged >= 0 && m[newer].txid > 1 {
		return &MetaPageError{Path: path, Page: damaged, Commit: m[newer].txid, Err: m[damaged].err}
	}
	return nil
}

// errTruncated is journal.ErrCorrupt for a file of size bytes whose pages
// need more: it was cut short (a copy, a full disk). It matches
// io.ErrUnexpectedEOF too.
func errTruncated(path string, size, need int64) error {
	return fmt.Errorf("%w: %s is %d bytes, shorter than the %d its pages need (truncated?): %w",
		journal.ErrCorrupt, path, size, need, io.ErrUnexpectedEOF)
}
