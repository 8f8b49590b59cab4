// This file tells a file that is not an idem journal at all (a text file, an
// image, another program's bbolt file) from a journal that is damaged, so an
// operator who gave the wrong path is not told that their journal is corrupt.

package boltjournal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/idem-go/idem/journal"
)

// ErrNotJournal is returned, matching journal.ErrCorrupt as well, when the
// file is not an idem journal: neither of its meta pages is a bbolt meta
// page, or it is a bbolt file without the journal's buckets. A journal that
// is damaged (a meta page with a bad checksum, a truncated file, records
// that do not decode) is journal.ErrCorrupt alone.
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
