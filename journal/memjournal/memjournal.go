// This file holds Store: the records, by their Seq, the index of their
// names, and the sorted Seqs of the pending ones that Pending pages through.

package memjournal

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/idem-go/idem/journal"
)

// pageSize is how many records Pending copies out at a time, under the
// lock: its memory stays bounded however many are pending.
const pageSize = 256

// Store is a journal.Store in memory. It is safe for concurrent use. It
// keeps copies of the records it is given and returns copies. Deferred and
// Durable updates are alike: both are visible at once, and neither outlives
// the process. Create expects rec.BodySHA256 to be journal.BodySum of
// rec.Body, as the contract says; a record that does not match reads with an
// error matching journal.ErrCorrupt.
//
// Claims are the embedded journal.Claims: this process's alone.
type Store struct {
	journal.Claims

	identityKey []byte
	now         func() time.Time // Prune's clock

	mu      sync.RWMutex
	closed  bool
	seq     uint64                     // the last Seq given
	recs    map[uint64]*journal.Record // by Seq; the Store's own copies
	names   map[journal.Name]uint64    // operation IDs and caller keys
	pending []uint64                   // Seqs of the pending records, sorted
	written time.Time                  // LatestWritten
}

var (
	_ journal.Store  = (*Store)(nil)
	_ journal.Lister = (*Store)(nil)
)

// Options configures a Store. The zero value, like a nil *Options, uses the real clock.
type Options struct {
	// Now is Prune's clock. Nil means time.Now.
	Now func() time.Time
}

// New returns an empty Store with a new random identity key. opts may be nil.
func New(opts *Options) *Store {
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand)
	now := time.Now
	if opts != nil && opts.Now != nil {
		now = opts.Now
	}
	return &Store{
		identityKey: key,
		now:         now,
		recs:        make(map[uint64]*journal.Record),
		names:       make(map[journal.Name]uint64),
	}
}

// names returns the names rec is found by: its operation ID, and its key if
// the caller chose it.
func namesOf(rec *journal.Record) []journal.Name {
	var ns []journal.Name
	if rec.OperationID != "" {
		ns = append(ns, journal.Name{OperationID: rec.OperationID})
	}
	if rec.CallerKey {
		ns = append(ns, journal.Name{Key: rec.Key})
	}
	return ns
}

// Create stores a copy of rec, a new pending operation, and sets its Ref
// (journal.Store). It fails with an error matching journal.ErrNameTaken if
// one of rec's names is taken.
func (s *Store) Create(_ context.Context, rec *journal.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return journal.ErrClosed
	}
	names := namesOf(rec)
	for _, n := range names {
		if _, taken := s.names[n]; taken {
			return fmt.Errorf("%w: %s", journal.ErrNameTaken, n)
		}
	}
	s.seq++
	for _, n := range names {
		s.names[n] = s.seq
	}
	ref := journal.Ref{Seq: s.seq}
	journal.SetRef(rec, ref)
	s.recs[s.seq] = clone(rec, true)
	if rec.State == journal.StatePending {
		s.pending = append(s.pending, s.seq) // the newest Seq: still sorted
	}
	s.sawWritten(rec)
	return nil
}

// Get returns a copy of the operation name names, with its body, or nil
// (journal.Store). A key idem minted is not found.
func (s *Store) Get(_ context.Context, name journal.Name) (*journal.Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, journal.ErrClosed
	}
	seq, ok := s.names[name]
	if !ok {
		return nil, nil
	}
	return s.read(seq)
}

// Reload returns a copy of the newest state of rec, with its body, or nil
// if it was pruned (journal.Store).
func (s *Store) Reload(_ context.Context, rec *journal.Record) (*journal.Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, journal.ErrClosed
	}
	return s.read(journal.RefOf(rec).Seq)
}

// read returns a copy of record seq, or nil; one not yet settled whose
// body does not match its BodySHA256 is an error (journal.ErrCorrupt), as
// the contract asks. The caller holds s.mu.
func (s *Store) read(seq uint64) (*journal.Record, error) {
	rec := s.recs[seq]
	if rec == nil {
		return nil, nil
	}
	if rec.State != journal.StateSettled && !(rec.State == journal.StateExpired && len(rec.Body) == 0) && !rec.BodyMatches() {
		return nil, fmt.Errorf("%w: memjournal: record %d (%s): body does not match its SHA-256",
			journal.ErrCorrupt, seq, journal.NameOf(rec))
	}
	return clone(rec, true), nil
}

// Update stores a copy of rec's new state (journal.Store): at once, whatever
// d. It fails with an error matching journal.ErrGone if the record was
// pruned. A settled record's body and headers are dropped.
func (s *Store) Update(_ context.Context, rec *journal.Record, _ journal.Durability) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return journal.ErrClosed
	}
	seq := journal.RefOf(rec).Seq
	cur := s.recs[seq]
	if cur == nil {
		return fmt.Errorf("%w: memjournal: record %d (%s)", journal.ErrGone, seq, journal.NameOf(rec))
	}
	next := clone(rec, rec.State != journal.StateSettled)
	if next.State == journal.StateSettled {
		next.Header = nil
	}
	journal.SetRef(next, journal.RefOf(cur))
	s.recs[seq] = next
	i, listed := slices.BinarySearch(s.pending, seq)
	switch isPending := next.State == journal.StatePending; {
	case isPending && !listed:
		s.pending = slices.Insert(s.pending, i, seq)
	case !isPending && listed:
		s.pending = slices.Delete(s.pending, i, i+1)
	}
	s.sawWritten(rec)
	return nil
}

// Flush returns nil: every update is already as durable as this Store
// makes any (journal.Store).
func (s *Store) Flush(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return journal.ErrClosed
	}
	return nil
}

// Pending yields copies of the pending records, without their bodies, in
// Seq order from the first above after, pageSize at a time (journal.Store).
// Each page reads the newest state; the lock is not held while the caller
// runs.
func (s *Store) Pending(ctx context.Context, after uint64) iter.Seq2[*journal.Record, error] {
	return journal.Pages(ctx, after, pageSize, s.page)
}

// page copies out up to pageSize pending records above after.
func (s *Store) page(after uint64) ([]*journal.Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, journal.ErrClosed
	}
	i, found := slices.BinarySearch(s.pending, after)
	if found {
		i++
	}
	seqs := s.pending[i:min(len(s.pending), i+pageSize)]
	page := make([]*journal.Record, len(seqs))
	for k, seq := range seqs {
		page[k] = clone(s.recs[seq], false)
	}
	return page, nil
}

// All yields copies of every record, without their bodies: the pending ones
// first, then the finished ones, each group in Seq order, pageSize at a time
// (journal.Lister).
func (s *Store) All(ctx context.Context) iter.Seq2[*journal.Record, error] {
	return func(yield func(*journal.Record, error) bool) {
		for _, page := range []func(uint64) ([]*journal.Record, error){s.page, s.finishedPage} {
			for rec, err := range journal.Pages(ctx, 0, pageSize, page) {
				if !yield(rec, err) || err != nil {
					return
				}
			}
		}
	}
}

// finishedPage copies out up to pageSize finished records above after.
func (s *Store) finishedPage(after uint64) ([]*journal.Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, journal.ErrClosed
	}
	var page []*journal.Record
	for _, seq := range slices.Sorted(maps.Keys(s.recs)) {
		if rec := s.recs[seq]; seq > after && rec.State != journal.StatePending {
			if page = append(page, clone(rec, false)); len(page) == pageSize {
				break
			}
		}
	}
	return page, nil
}

// Records returns a copy of every record, bodies included: the pending ones
// first, then the settled, failed and expired ones not yet pruned, each group
// in Seq order, as boltjournal.Journal.Records lists them. It is for
// inspection (a test, a listing), not part of journal.Store.
func (s *Store) Records() ([]*journal.Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, journal.ErrClosed
	}
	seqs := slices.Sorted(maps.Keys(s.recs))
	recs := make([]*journal.Record, 0, len(seqs))
	for _, pending := range []bool{true, false} {
		for _, seq := range seqs {
			if rec := s.recs[seq]; (rec.State == journal.StatePending) == pending {
				recs = append(recs, clone(rec, true))
			}
		}
	}
	return recs, nil
}

// PendingCount returns how many operations are pending (journal.Store).
func (s *Store) PendingCount(context.Context) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, journal.ErrClosed
	}
	return len(s.pending), nil
}

// IdentityKey returns a copy of the Store's 32 random bytes, made by New
// (journal.Store).
func (s *Store) IdentityKey() []byte { return bytes.Clone(s.identityKey) }

// LatestWritten returns the newest Record.Written the Store was given
// (journal.Store); zero if none.
func (s *Store) LatestWritten() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.written
}

// sawWritten keeps LatestWritten. The caller holds s.mu for writing.
func (s *Store) sawWritten(rec *journal.Record) {
	if w := rec.Written(); w.After(s.written) {
		s.written = w
	}
}

// Prune deletes the settled, failed and expired records last updated more
// than retention ago, and frees their names; it never deletes a pending
// record. It returns how many it deleted. (It has the shape of
// journaltest.Pruner.)
func (s *Store) Prune(retention time.Duration) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, journal.ErrClosed
	}
	cutoff := s.now().Add(-retention)
	n := 0
	for seq, rec := range s.recs {
		if rec.State == journal.StatePending || !rec.Updated.Before(cutoff) {
			continue
		}
		for _, name := range namesOf(rec) {
			if s.names[name] == seq {
				delete(s.names, name)
			}
		}
		delete(s.recs, seq)
		n++
	}
	return n, nil
}

// Close releases the records; later calls fail with journal.ErrClosed. A
// second Close returns nil. Claims are not affected.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.recs, s.names, s.pending = nil, nil, nil
	return nil
}

// clone returns a copy of rec sharing no memory with it, with its body if
// withBody.
func clone(rec *journal.Record, withBody bool) *journal.Record {
	cp := *rec
	cp.Header = rec.Header.Clone()
	cp.Dropped = slices.Clone(rec.Dropped)
	cp.DroppedQuery = slices.Clone(rec.DroppedQuery)
	cp.Body = nil
	if withBody {
		cp.Body = bytes.Clone(rec.Body)
	}
	ref := journal.RefOf(rec)
	ref.Meta = bytes.Clone(ref.Meta)
	journal.SetRef(&cp, ref)
	return &cp
}
