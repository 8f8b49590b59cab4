// This file makes the Journal a journal.Store: the contract the Transport
// uses, over the Journal's own writes (commit.go, deferred.go) and reads
// (read.go).

package boltjournal

import (
	"context"
	"iter"
	"time"

	"github.com/idem-go/idem/journal"
)

var _ journal.Store = (*Journal)(nil)

// Create writes rec, a new pending operation, durably (journal.Store).
func (j *Journal) Create(_ context.Context, rec *Record) error {
	return j.insert(rec, rec.CallerKey)
}

// Get returns the operation name names, with its body, or nil
// (journal.Store). A key idem minted is not found: it is not indexed.
func (j *Journal) Get(_ context.Context, name journal.Name) (*Record, error) {
	return j.find(indexKey(name))
}

// Reload returns the newest state of rec, with its body, or nil
// (journal.Store).
func (j *Journal) Reload(_ context.Context, rec *Record) (*Record, error) {
	return j.reget(rec)
}

// Update writes rec's new state (journal.Store): Deferred rides the next
// commit (deferred.go); Durable commits it, in place for a pending record,
// or back from the failed ones for a repended one.
func (j *Journal) Update(_ context.Context, rec *Record, d journal.Durability) error {
	switch {
	case rec.Sealed:
		return j.updateSealed(rec)
	case d == journal.Deferred:
		return j.save(rec)
	case rec.State == StatePending:
		return j.repend(rec)
	}
	if err := j.save(rec); err != nil {
		return err
	}
	return j.flush()
}

// Flush commits every deferred update made before it (journal.Store).
func (j *Journal) Flush(context.Context) error { return j.flush() }

// Pending yields the pending records, without their bodies, from the first
// whose sequence number is above after (journal.Store). Each keeps, in its
// Ref, the value it was read from, a body stored inline (at most 2 KiB)
// included: Reload sends from it while the record is unchanged.
func (j *Journal) Pending(ctx context.Context, after uint64) iter.Seq2[*Record, error] {
	return j.PendingPicked(ctx, after, nil)
}

// PendingPicked is Pending, asking pick, if not nil, about each record by
// its target before it is copied out of the file and decoded
// (journal.Picker).
func (j *Journal) PendingPicked(_ context.Context, after uint64, pick func(seq uint64, target []byte) journal.Pick) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		var err error
		for rec := range j.pendingSeqAfter(after, pick, &err) {
			if !yield(rec, nil) {
				return
			}
		}
		if err != nil {
			yield(nil, err)
		}
	}
}

// PendingCount returns how many operations are pending (journal.Store).
func (j *Journal) PendingCount(context.Context) (int, error) { return j.pendingCount() }

// Claim, TryClaim and Release hold an operation for sending in this process
// (journal.Store); Resolve and Discard refuse one that is held.
func (j *Journal) Claim(ctx context.Context, name journal.Name) error { return j.ops.Claim(ctx, name) }

// TryClaim is Claim without waiting.
func (j *Journal) TryClaim(name journal.Name) bool { return j.ops.TryClaim(name) }

// Release frees a claim.
func (j *Journal) Release(name journal.Name) { j.ops.Release(name) }

// IdentityKey returns the journal's HMAC key for credential tags
// (identity_key.go); nil in a read-only journal of a file written before it
// existed.
func (j *Journal) IdentityKey() []byte { return j.identityKey }

// LatestWritten returns the newest time the journal holds or has been given
// to write (written.go).
func (j *Journal) LatestWritten() time.Time { return j.latestWritten() }

// indexKey is the index entry of an operation's name: "o\x00" and its
// operation ID, or "k\x00" and a caller's key.
func indexKey(name journal.Name) string {
	if name.OperationID != "" {
		return "o\x00" + name.OperationID
	}
	return "k\x00" + name.Key
}

// updateSealed writes the state of a record listed without its sealed part
// (Record.Sealed: its key is not in the Keyring), durably, keeping that part
// as the file holds it. Only a record still pending in the file changes
// (journal.ErrGone otherwise): its state is all a listing could read.
func (j *Journal) updateSealed(rec *Record) error {
	_, err := j.restate(seqOf(rec), false, func(cur *Record) error {
		if cur.State != StatePending {
			return journal.ErrGone
		}
		cur.State, cur.Status, cur.Attempts, cur.LastError = rec.State, rec.Status, rec.Attempts, rec.LastError
		cur.LastAttempt, cur.NextAttempt, cur.Updated = rec.LastAttempt, rec.NextAttempt, rec.Updated
		return nil
	})
	return err
}
