// This file holds the PostgreSQL contract floor: the PostgreSQL floor
// (pgfloor.go) doing the database work idem's contract asks of pgjournal,
// and nothing more. It writes into a table made by pgjournal's own schema
// (its indexes included), in a schema of its own: each write-ahead is a
// row of pgjournal's columns (a minted UUID key, the record column of
// idem's JSON form with the body's SHA-256, the body, a lease on the
// database's clock), and a settle, instead of the bare floor's DELETE, is
// the UPDATE that keeps the settled record for the dedupe window,
// conditional on the row's epoch and lease as pgjournal's is, riding the
// next write-ahead's transaction. It sends the POST as one attempt of idem's
// contract (floor_attempt.go). What it leaves out is idem's client work:
// claims, retries and the classification of a failed attempt, the Transport.

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/idem-go/idem/internal/recordjson"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgContractRow is the name of the PostgreSQL contract floor's row.
const pgContractRow = "pg contract POST"

// pgContractNamespace is the namespace of the contract floor's rows.
const pgContractNamespace = "contract-floor"

// pgContractFloor is the contract floor's RoundTripper.
type pgContractFloor struct {
	pool   *pgxpool.Pool
	schema string // quoted
	holder string
	base   http.RoundTripper

	q *groupCommitter[*pgContractPut, pgContractSettle]

	commits, writeAheads atomic.Uint64 // commits that wait for the WAL flush; rows inserted
}

// pgContractPut is one write-ahead; seq is set once it is committed.
type pgContractPut struct {
	key    string
	record []byte
	body   []byte
	seq    int64
}

// pgContractSettle is one settle: the row and its settled record.
type pgContractSettle struct {
	seq    int64
	record string
}

// recordColumnOf is rec's record column, as pgjournal encodes a plaintext
// record (pgjournal/record.go): idem's JSON form less what has a column of
// its own, written by the same codec.
func recordColumnOf(rec *journal.Record) ([]byte, error) {
	return recordjson.Append(make([]byte, 0, 512), rec, recordjson.Column)
}

// newPGContractFloor makes pgjournal's tables in schema (a new one) with
// pool and returns the contract floor over them, sending with base.
func newPGContractFloor(ctx context.Context, pool *pgxpool.Pool, schema string, base http.RoundTripper) (*pgContractFloor, error) {
	if err := pgjournal.Migrate(ctx, pool, &pgjournal.Options{Schema: schema}); err != nil {
		return nil, err
	}
	f := &pgContractFloor{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), holder: uuid.NewString(), base: base}
	f.q = newGroupCommitter[*pgContractPut, pgContractSettle](pgFloorFlush, 0, func(bool) { f.commit() })
	return f, nil
}

func (f *pgContractFloor) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	rec := journal.Record{Key: uuid.NewString(), Method: req.Method, URL: req.URL.String(), Header: req.Header,
		ContentType: req.Header.Get("Content-Type"), Body: body, BodySHA256: hex.EncodeToString(sum[:]),
		Created: time.Now(), State: journal.StatePending}
	p := &pgContractPut{key: rec.Key, body: body}
	if p.record, err = recordColumnOf(&rec); err != nil {
		return nil, err
	}
	if err := f.q.put(p); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := sendAttempt(f.base, withKey(ctx, req, rec.Key, body), cancel, true)
	if err != nil {
		return nil, err
	}
	rec.Header, rec.State, rec.Attempts, rec.Status = nil, journal.StateSettled, 1, resp.StatusCode
	rec.LastAttempt = time.Now()
	settled, err := recordColumnOf(&rec)
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	f.q.settle(pgContractSettle{seq: p.seq, record: string(settled)})
	return resp, nil
}

// commit writes the queued puts (up to pgFloorBatch a transaction) in one
// INSERT and the settles in one UPDATE after it, in one transaction that
// waits for its flush; with only settles queued, it writes them in a
// transaction that does not wait. Only the UPDATE is planned afresh, as
// pgjournal's is (its cached plan would scan the table as it grows).
func (f *pgContractFloor) commit() {
	for {
		puts, settles, more := f.q.take(pgFloorBatch)
		if len(puts) == 0 && len(settles) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b := &pgx.Batch{}
		b.Queue(`BEGIN`)
		if len(puts) == 0 {
			b.Queue(`SET LOCAL synchronous_commit = off`)
		}
		if n := len(puts); n > 0 {
			keys, records, bodies := make([]string, n), make([]string, n), make([][]byte, n)
			for i, p := range puts {
				keys[i], records[i], bodies[i] = p.p.key, string(p.p.record), p.p.body
			}
			b.Queue(`INSERT INTO `+f.schema+`.operations
					(namespace, key, caller_key, state, record, body, updated, holder, leased_until)
				SELECT $1, k, false, 1, rec::jsonb, b, now(), $2, now() + interval '30 seconds'
				FROM unnest($3::text[], $4::text[], $5::bytea[]) AS t(k, rec, b)
				RETURNING seq, key`, pgContractNamespace, f.holder, keys, records, bodies,
			).Query(func(rows pgx.Rows) error {
				seqs := make(map[string]int64, n)
				var seq int64
				var key string
				if _, err := pgx.ForEachRow(rows, []any{&seq, &key}, func() error {
					seqs[key] = seq
					return nil
				}); err != nil {
					return err
				}
				for _, p := range puts {
					p.p.seq = seqs[p.p.key]
				}
				return nil
			})
		}
		if len(settles) > 0 {
			b.Queue(`SET LOCAL plan_cache_mode = force_custom_plan`)
			seqs, records := make([]int64, len(settles)), make([]string, len(settles))
			for i, s := range settles {
				seqs[i], records[i] = s.seq, s.record
			}
			b.Queue(`UPDATE `+f.schema+`.operations o
				SET state = 2, record = u.rec::jsonb, updated = now(), body = NULL, leased_until = NULL
				FROM unnest($2::bigint[], $3::text[]) AS u(seq, rec)
				WHERE o.namespace = $1 AND o.seq = u.seq AND o.epoch = 1
					AND (o.holder = $4 OR o.leased_until IS NULL OR o.leased_until < now())`,
				pgContractNamespace, seqs, records, f.holder)
		}
		b.Queue(`COMMIT`)
		err := f.pool.SendBatch(ctx, b).Close() // a lost settle leaves a row pending: the floor never reads it
		if err == nil && len(puts) > 0 {
			f.commits.Add(1)
			f.writeAheads.Add(uint64(len(puts)))
		}
		release(puts, err)
		cancel()
		if !more {
			return
		}
	}
}

// stats returns the contract floor's counters so far.
func (f *pgContractFloor) stats() journalCounts {
	return journalCounts{commits: f.commits.Load(), writeAheads: f.writeAheads.Load()}
}

// Close commits what is queued and stops the committer; later calls do
// nothing. The pool is the caller's.
func (f *pgContractFloor) Close() { f.q.Close() }
