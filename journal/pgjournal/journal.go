// This file holds the Journal: Open, Close, and what it keeps between
// calls (its queries, its claims and leases, its identity key, its
// Keyring and whether its namespace is sealed).

package pgjournal

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/seal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Journal is a journal.Store on PostgreSQL. It is safe for concurrent use.
// Close it when done; Close does not close the pool, which is the caller's.
type Journal struct {
	pool   *pgxpool.Pool
	opts   Options
	schema string // quoted
	holder string // this Journal's identity in leased rows, random per Open
	idKey  []byte
	ring   *seal.Ring // Options.Encryption; nil: write plaintext, open nothing sealed
	// sealedNS is set when the namespace was once opened with
	// Options.Encryption and ring is nil: no new row is written
	// (errNeedsKeyring).
	sealedNS atomic.Bool

	claims  journal.Claims
	creates group[pendingCreate, struct{}, error] // the write-aheads (create.go)
	lookups group[string, struct{}, lookupResult] // the Gets by operation ID (lookup.go)
	takes   group[string, string, takeResult]     // the leases by operation ID (leasebatch.go)
	stats   stats                                 // Stats (stats.go)

	local  func() time.Time // the local clock: time.Now, but in tests
	offset atomic.Int64     // the database's clock minus the local one, in nanoseconds (clock.go)

	retention atomic.Int64 // Options.Retention, raised by KeepAtLeast, in nanoseconds

	mu          sync.Mutex
	leases      map[journal.Name]lease    // the rows this Journal leases
	noRow       map[journal.Name]struct{} // names claimed here while they had no row (lease.go)
	closed      bool
	queued      map[journal.Name]*pendingSettle // deferred settles not yet written (settles.go)
	writing     map[journal.Name]inFlight       // settles being written, and when they are
	settleTimer *time.Timer                     // writes the queue if no write-ahead came
	settleDelay time.Duration                   // settleDelay, but in tests

	stop chan struct{}  // closed by Close: stops the heartbeat
	done sync.WaitGroup // the heartbeat
}

// lease is a row this Journal leased, and the epoch it leased it at.
type lease struct {
	seq   int64
	epoch int64
}

// Open returns the journal opts.Namespace in opts.Schema over pool,
// creating or upgrading the tables first (Migrate). It fails with an error
// matching journal.ErrInvalidOptions for invalid opts, or the database's
// error.
func Open(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Journal, error) {
	c, err := opts.resolved()
	if err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errNilPool
	}
	if ctx == nil {
		return nil, errNilContext
	}
	if err := Migrate(ctx, pool, &c); err != nil {
		return nil, err
	}
	j := &Journal{pool: pool, opts: c, schema: pgx.Identifier{c.Schema}.Sanitize(),
		holder: uuid.NewString(), leases: map[journal.Name]lease{}, noRow: map[journal.Name]struct{}{},
		queued: map[journal.Name]*pendingSettle{}, writing: map[journal.Name]inFlight{}, settleDelay: settleDelay,
		stop: make(chan struct{}), local: c.local, ring: c.ring}
	j.creates.setup(createBatch, true, nil, j.insert)
	j.lookups.setup(lookupBatch, false, nil, j.readBatch)
	j.takes.setup(takeBatch, false, takeKey, j.takeBatch)
	if err := j.loadNamespace(ctx); err != nil {
		return nil, err
	}
	if err := j.syncClock(ctx); err != nil {
		return nil, err
	}
	j.retention.Store(int64(c.Retention))
	j.done.Go(j.heartbeat)
	return j, nil
}

// loadNamespace reads the namespace's identity key and whether it is
// sealed, making its row if the namespace is new, and marking it sealed,
// for good, if this Journal seals: from then on a Journal without
// Options.Encryption writes no new row there.
func (j *Journal) loadNamespace(ctx context.Context) error {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return err
	}
	sealing := j.ring != nil
	_, err := j.pool.Exec(ctx, j.sql(`INSERT INTO {s}.namespaces AS n (namespace, identity_key, sealed) VALUES ($1, $2, $3)
		ON CONFLICT (namespace) DO UPDATE SET sealed = true WHERE $3 AND NOT n.sealed`), j.opts.Namespace, k, sealing)
	if err != nil {
		return j.fail("open", err)
	}
	var sealed bool
	err = j.pool.QueryRow(ctx, j.sql(`SELECT identity_key, sealed FROM {s}.namespaces WHERE namespace = $1`),
		j.opts.Namespace).Scan(&j.idKey, &sealed)
	if err != nil {
		return j.fail("open", err)
	}
	j.sealedNS.Store(sealed && !sealing)
	return nil
}

// errNeedsKeyring refuses a new row in a namespace once opened with
// Options.Encryption, from a Journal without it: the row would be
// plaintext.
func (j *Journal) errNeedsKeyring() error {
	return fmt.Errorf("%w: pgjournal %s/%s was opened with Options.Encryption: new rows need it too",
		journal.ErrInvalidOptions, j.opts.Schema, j.opts.Namespace)
}

// sql puts the quoted schema into a query.
func (j *Journal) sql(q string) string { return strings.ReplaceAll(q, "{s}", j.schema) }

// fail wraps a database error with what was being done.
func (j *Journal) fail(what string, err error) error {
	return fmt.Errorf("pgjournal: %s %s/%s: %w", what, j.opts.Schema, j.opts.Namespace, err)
}

// check returns journal.ErrClosed once the Journal is closed.
func (j *Journal) check() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return fmt.Errorf("%w: pgjournal %s/%s", journal.ErrClosed, j.opts.Schema, j.opts.Namespace)
	}
	return nil
}

// Close writes the settles still queued, stops renewing this Journal's
// leases and gives them up, so that another instance may take its
// operations at once. Later calls return
// errors matching journal.ErrClosed; a second Close returns nil.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	if j.settleTimer != nil {
		j.settleTimer.Stop()
	}
	j.mu.Unlock()
	close(j.stop)
	j.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ferr := j.writeQueued(ctx) // settles queued: an error leaves them to be resent, with the same key
	j.mu.Lock()
	held := j.leases
	j.leases = nil
	j.mu.Unlock()
	if len(held) == 0 {
		return ferr
	}
	seqs, epochs := columnsOf(held)
	// An error leaves the leases to run out: other instances adopt the rows
	// Lease later instead of now.
	_, err := j.pool.Exec(ctx, j.sql(`UPDATE {s}.operations o SET leased_until = NULL
		FROM unnest($2::bigint[], $3::bigint[]) AS l(seq, epoch)
		WHERE o.namespace = $1 AND o.seq = l.seq AND o.epoch = l.epoch AND o.holder = $4`),
		j.opts.Namespace, seqs, epochs, j.holder)
	if err != nil {
		return errors.Join(ferr, j.fail("close: release leases", err))
	}
	return ferr
}

// IdentityKey returns the namespace's HMAC key for credential tags.
func (j *Journal) IdentityKey() []byte { return append([]byte(nil), j.idKey...) }

// LatestWritten returns the newest time written to a record of the
// namespace (journal.Record.Written).
func (j *Journal) LatestWritten() time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Lease)
	defer cancel()
	j.writeQueued(ctx) // an error leaves the queued settles' times out of the answer
	var t *time.Time
	err := j.pool.QueryRow(ctx, j.sql(`SELECT max(greatest(updated,
			(record->>'created')::timestamptz, (record->>'last_attempt')::timestamptz))
		FROM {s}.operations WHERE namespace = $1`), j.opts.Namespace).Scan(&t)
	if err != nil || t == nil {
		return time.Time{}
	}
	return *t
}
