// This file holds the claims on operations: in this process, journal.Claims;
// across instances, a lease on the operation's row, on the database's clock,
// renewed by a heartbeat and fenced by the row's epoch.

package pgjournal

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/idem-go/idem/journal"
)

// Claim holds the operation name names for sending: in this process, then
// its row's lease, waiting while another live instance holds it, until ctx
// ends (journal.Store). A name with no row yet is claimed in this process
// only; Create leases the row it writes. A name without an operation ID (a
// key: one idem mints is new, so has no row) is claimed in this process
// only, with no round trip: the Get or Reload that reads its row before it
// is sent takes the row's lease first, waiting as Claim would have.
func (j *Journal) Claim(ctx context.Context, name journal.Name) error {
	if err := j.claims.Claim(ctx, name); err != nil {
		return err
	}
	if name.OperationID == "" {
		j.mu.Lock()
		j.noRow[name] = struct{}{}
		j.mu.Unlock()
		return nil
	}
	// A settle of name this Journal queued gives the row's lease up when it
	// is written: write it first, so that the lease taken now is not lost to it.
	if err := j.writeQueuedFor(ctx, name); err != nil {
		j.claims.Release(name)
		return err
	}
	if err := j.awaitLease(ctx, name); err != nil {
		j.claims.Release(name)
		return err
	}
	return nil
}

// awaitLease takes name's row lease, waiting while another live instance
// holds it, until ctx ends.
func (j *Journal) awaitLease(ctx context.Context, name journal.Name) error {
	wait := min(j.opts.Lease/4, 250*time.Millisecond)
	for {
		ok, err := j.takeLease(ctx, name)
		if err == nil && ok {
			return nil
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// TryClaim is Claim without waiting: false if this process or another live
// instance holds name, or the database cannot be reached within Lease.
func (j *Journal) TryClaim(name journal.Name) bool {
	if !j.claims.TryClaim(name) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	if err := j.writeQueuedFor(ctx, name); err != nil { // as in Claim
		j.claims.Release(name)
		return false
	}
	if ok, err := j.takeLease(ctx, name); err != nil || !ok {
		j.claims.Release(name)
		return false
	}
	return true
}

// Release gives up the claim on name, and its row's lease, unless a
// settle of name is queued: that write gives the lease up, and until it
// lands the row must stay this Journal's, or another instance would send
// it again.
func (j *Journal) Release(name journal.Name) {
	j.mu.Lock()
	l, ok := j.leases[name]
	if j.settlingLocked(name) {
		ok = false
	} else {
		delete(j.leases, name)
	}
	delete(j.noRow, name)
	j.mu.Unlock()
	if ok {
		ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
		j.unlease(ctx, l) // an error leaves the lease to run out
		cancel()
	}
	j.claims.Release(name)
}

// takeLease leases name's row to this Journal, unless another live
// instance holds it; it reports whether this Journal holds it now (true
// for a name with no row). Taking a row from another holder, or after its
// lease ran out, bumps its epoch, which fences the writes of the one
// before.
func (j *Journal) takeLease(ctx context.Context, name journal.Name) (bool, error) {
	if j.check() != nil {
		// Closed: claims are this process's alone (journal.Store); a lease
		// taken now would be neither renewed nor given up, and would keep
		// other instances off the row for a whole Lease.
		return true, nil
	}
	var seq, epoch *int64
	var exists bool
	var err error
	if name.OperationID != "" {
		r := j.takeByID(ctx, name.OperationID) // shares one statement with the leases of the moment
		seq, epoch, exists, err = r.seq, r.epoch, r.exists, r.err
	} else {
		// A key names an operation without an ID (journal.NameOf), whether
		// the caller chose it or idem minted it: both are leased while sent.
		// One round trip: the UPDATE takes the lease if it may; the EXISTS,
		// which sees the rows as they were, tells "no row" from "another's".
		err = j.pool.QueryRow(ctx, j.sql(`WITH took AS (UPDATE {s}.operations
			SET epoch = CASE WHEN holder = $3 AND leased_until >= now() THEN epoch ELSE epoch + 1 END,
				holder = $3, leased_until = now() + $4::interval
			WHERE namespace = $1 AND key = $2 AND operation_id IS NULL
				AND (leased_until IS NULL OR leased_until < now() OR holder = $3)
			RETURNING seq, epoch)
		SELECT (SELECT seq FROM took LIMIT 1), (SELECT epoch FROM took LIMIT 1),
			EXISTS (SELECT 1 FROM {s}.operations WHERE namespace = $1 AND key = $2 AND operation_id IS NULL)`),
			j.opts.Namespace, name.Key, j.holder, j.opts.Lease).Scan(&seq, &epoch, &exists)
	}
	switch {
	case err != nil:
		return false, j.fail("lease", err)
	case seq == nil && !exists:
		j.mu.Lock()
		j.noRow[name] = struct{}{} // Get takes the lease if another instance writes the row meanwhile
		j.mu.Unlock()
		return true, nil // no row: the claim in this process is all there is
	case seq == nil:
		return false, nil // leased by another live instance
	}
	l := lease{seq: *seq, epoch: *epoch}
	j.stats.commits.Add(1)
	j.noteLease(name, l)
	return true, nil
}

// noteLease remembers that this Journal leases name's row, for the
// heartbeat and Release.
func (j *Journal) noteLease(name journal.Name, l lease) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.noRow, name)
	if j.leases != nil {
		j.leases[name] = l
	}
}

// forgetLease drops name's lease from those this Journal renews, once a
// write released it.
func (j *Journal) forgetLease(name journal.Name) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.leases, name)
}

// unlease gives up the lease on l's row, if this Journal still holds it.
func (j *Journal) unlease(ctx context.Context, l lease) error {
	_, err := j.pool.Exec(ctx, j.sql(`UPDATE {s}.operations SET leased_until = NULL
		WHERE namespace = $1 AND seq = $2 AND holder = $3 AND epoch = $4`),
		j.opts.Namespace, l.seq, j.holder, l.epoch)
	if err != nil {
		return j.fail("release lease", err)
	}
	j.stats.commits.Add(1)
	return nil
}

// heartbeat renews this Journal's leases, and measures the database's
// clock again, every Lease/3 until Close; after the renewal it prunes the
// namespace at its first tick (after NewTransport raised the retention),
// then every pruneEvery. A failed renewal is tried again next tick; a
// lease that runs out meanwhile is another instance's to take, and
// fencing holds.
func (j *Journal) heartbeat() {
	t := time.NewTicker(j.opts.Lease / 3)
	defer t.Stop()
	lastPrune := time.Time{} // prune at once: after KeepAtLeast had its say, see below
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease/3)
		j.renew(ctx)
		j.syncClock(ctx) // a failure keeps the last offset
		cancel()
		if time.Since(lastPrune) >= pruneEvery { // after the renewal: a prune may take a while
			j.prune()
			lastPrune = time.Now()
		}
	}
}

// renew extends, to now() + Lease, every lease this Journal still holds at
// the epoch it took it, in one statement, and returns how many it renewed.
// A lease given up (leased_until NULL) by a final Update or a Release that
// ran while renew was under way stays given up. A row another transaction
// holds locked (a settle being written, stuck) is left for the next tick
// rather than waited for: the others' renewals must not wait on it.
func (j *Journal) renew(ctx context.Context) (int64, error) {
	j.mu.Lock()
	seqs, epochs := columnsOf(j.leases)
	j.mu.Unlock()
	if len(seqs) == 0 {
		return 0, nil
	}
	tag, err := j.pool.Exec(ctx, j.sql(`UPDATE {s}.operations o SET leased_until = now() + $3::interval
		WHERE o.namespace = $1 AND o.seq IN (
			SELECT i.seq FROM {s}.operations i JOIN unnest($2::bigint[], $4::bigint[]) AS l(seq, epoch)
				ON i.seq = l.seq AND i.epoch = l.epoch
			WHERE i.namespace = $1 AND i.holder = $5 AND i.leased_until IS NOT NULL
			FOR UPDATE OF i SKIP LOCKED)`),
		freshPlan, j.opts.Namespace, seqs, j.opts.Lease, epochs, j.holder)
	if err != nil {
		return 0, j.fail("renew leases", err)
	}
	j.stats.commits.Add(1)
	return tag.RowsAffected(), nil
}

// columnsOf returns the rows and epochs of leases, as two arrays for
// unnest: one statement renews or releases them all. The rows are in seq
// order, as a settling UPDATE locks them, so the two never deadlock.
func columnsOf(leases map[journal.Name]lease) (seqs, epochs []int64) {
	seqs = make([]int64, 0, len(leases))
	epochs = make([]int64, 0, len(leases))
	ls := slices.SortedFunc(maps.Values(leases), func(a, b lease) int { return cmp.Compare(a.seq, b.seq) })
	for _, l := range ls {
		seqs, epochs = append(seqs, l.seq), append(epochs, l.epoch)
	}
	return seqs, epochs
}
