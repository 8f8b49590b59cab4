// This file tells a file that is not an idem journal at all (a text file, an
// image, another program's bbolt file) from a journal that is damaged, so an
// operator who gave the wrong path is not told that their journal is corrupt,
// and one whose journal lost both meta pages is not told it is not one: its
// data pages still hold idem's buckets, and pending operations with them.

package boltjournal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-go/idem/journal"
)

// ErrNotJournal is returned, matching journal.ErrCorrupt as well, when the
// file is not an idem journal: neither of its meta pages is a bbolt meta
// page and no page in its first 64 MiB holds the journal's buckets, or it
// is a bbolt file without the journal's buckets. A journal that is damaged
// (a meta page with a bad checksum, both meta pages lost while its data
// pages hold its buckets, a truncated file, records that do not decode) is
// journal.ErrCorrupt alone.
var ErrNotJournal = errors.New("idem: not an idem journal")

// notJournalError names the file and why it is not a journal; it unwraps to
// ErrNotJournal and journal.ErrCorrupt, so callers that match ErrCorrupt, as
// before this error existed, still do, and to err if set (io.ErrUnexpectedEOF
// for a file too short to tell: it may be a journal cut short).
type notJournalError struct {
	path, why string
	err       error
}

func (e *notJournalError) Error() string {
	return fmt.Sprintf("idem: %s is not an idem journal (%s)", e.path, e.why)
}

func (e *notJournalError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrNotJournal, journal.ErrCorrupt, e.err}
	}
	return []error{ErrNotJournal, journal.ErrCorrupt}
}

// hasBoltMagic reports whether f's first page carries bbolt's magic number
// where a meta page has it.
func hasBoltMagic(f *os.File) bool {
	var b [4]byte
	_, err := f.ReadAt(b[:], metaOffset)
	return err == nil && binary.NativeEndian.Uint32(b[:]) == boltMagic
}

// journalBuckets are the buckets every journal version has, found by name in
// the root bucket's page when neither meta page says where that page is.
var journalBuckets = [][]byte{bucketPending, bucketDone, bucketBodies, bucketIndex}

// The layout of a bbolt leaf page (go.etcd.io/bbolt internal/common,
// page.go), in the machine's byte order: a 16-byte header (page ID, flags
// and element count), then 16 bytes per element (flags, the key's position
// from the element's own start, key size, value size). A bucket is an
// element with bucketLeafFlag.
const (
	pageHeaderLen  = 16
	leafElemLen    = 16
	leafPageFlag   = 0x02
	bucketLeafFlag = 0x01
	minPageSize    = 1 << 10 // the smallest page size looked for, as in checkMeta
	maxPageSize    = 1 << 16 // the largest common one (os.Getpagesize)
)

// maxBucketScan bounds how much of a file whose meta pages are both invalid
// is read looking for idem's buckets. Every commit rewrites the root
// bucket's page, and bbolt (with its default array freelist) puts it in the
// lowest free page, leaving the copy it replaced as it was: the root page
// and its older copies lie near the start of the file.
const maxBucketScan = 64 << 20

// maxRootCopies bounds how many pages holding idem's buckets the error names.
const maxRootCopies = 8

// rootCopies are the pages where findJournalBuckets found idem's buckets:
// the journal's root bucket as of its last commit, or older copies of it.
type rootCopies struct {
	pageSize int64    // the file's page size: a page's offset over its ID
	ids      []uint64 // their page IDs, in file order
}

// findJournalBuckets looks, in the first maxBucketScan bytes of f, for bbolt
// leaf pages that hold idem's buckets (journalBuckets): the journal's root
// bucket, as of its last commit or an older one. It only reads f. It looks
// at every minPageSize boundary, so that any power-of-two page size from
// minPageSize up is covered without the meta pages' word for it.
func findJournalBuckets(f *os.File) (rootCopies, bool) {
	const chunk = 1 << 20
	var found rootCopies
	buf := make([]byte, chunk+maxPageSize) // a page starting near a chunk's end is read whole
	for base := int64(0); base < maxBucketScan && len(found.ids) < maxRootCopies; base += chunk {
		n, err := f.ReadAt(buf, base)
		for i := 0; i < chunk && i < n && len(found.ids) < maxRootCopies; i += minPageSize {
			id, ps, ok := journalBucketPage(buf[i:n], base+int64(i))
			if ok && (found.pageSize == 0 || found.pageSize == ps) {
				found.pageSize, found.ids = ps, append(found.ids, id)
			}
		}
		if err != nil { // the end of the file, or a read error: nothing more to find
			break
		}
	}
	return found, len(found.ids) > 0
}

// journalBucketPage reports whether b, read at offset off, is a bbolt leaf
// page at its own place in the file (its ID times a power-of-two page size
// is off) whose elements include every one of journalBuckets as a bucket,
// and returns its ID and that page size.
func journalBucketPage(b []byte, off int64) (id uint64, pageSize int64, ok bool) {
	if len(b) < pageHeaderLen {
		return 0, 0, false
	}
	ne := binary.NativeEndian
	id, flags, count := ne.Uint64(b), ne.Uint16(b[8:]), int(ne.Uint16(b[10:]))
	if flags != leafPageFlag || id < 2 || uint64(off)%id != 0 || count < len(journalBuckets) ||
		pageHeaderLen+count*leafElemLen > len(b) {
		return 0, 0, false
	}
	ps := uint64(off) / id
	if ps < minPageSize || ps&(ps-1) != 0 {
		return 0, 0, false
	}
	found := 0
	for i := range count {
		at := pageHeaderLen + i*leafElemLen
		e := b[at:]
		start := uint64(at) + uint64(ne.Uint32(e[4:]))
		end := start + uint64(ne.Uint32(e[8:]))
		if ne.Uint32(e)&bucketLeafFlag == 0 || end > uint64(len(b)) {
			continue
		}
		if slices.ContainsFunc(journalBuckets, func(name []byte) bool { return bytes.Equal(name, b[start:end]) }) {
			found++ // keys in a page are unique
		}
	}
	return id, int64(ps), found == len(journalBuckets)
}

// errMetasLost is journal.ErrCorrupt for a journal whose two meta pages are
// both invalid while its data pages hold idem's buckets: bbolt cannot open
// it, and it may hold operations the server has received or must still
// receive. It says so, where the root bucket's copies are, and what an
// operator can do (docs/real-world.md gives the steps).
func errMetasLost(path string, m [2]metaPage, c rootCopies) error {
	ids := make([]string, len(c.ids))
	for i, id := range c.ids {
		ids[i] = strconv.FormatUint(id, 10)
	}
	return fmt.Errorf("%w: %s is an idem journal whose two bbolt meta pages are both damaged (page 0: %w; page 1: %w); "+
		"its data pages still hold its buckets, and may hold pending operations. Keep the file: do not delete or "+
		"overwrite it. Restore it from a copy if there is one; else rebuild a copy with bbolt's own surgery meta "+
		"update and compact commands (go.etcd.io/bbolt/cmd/bbolt), naming one of the copies of its root bucket, "+
		"at pages %s (page size %d), as \"The journal file\" in the docs/real-world.md of github.com/idem-go/idem shows; "+
		"idem journal accept-older needs one intact meta page and cannot open it",
		journal.ErrCorrupt, path, m[0].err, m[1].err, strings.Join(ids, ", "), c.pageSize)
}
