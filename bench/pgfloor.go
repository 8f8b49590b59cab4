// This file holds the PostgreSQL floor client: the least a durable
// PostgreSQL write-ahead client can do with pgx v5, measured in the same
// rounds as idem over pgjournal (postgres.go). One committer goroutine
// (groupcommit.go) writes every write-ahead queued at that moment in one
// multi-row INSERT (synchronous_commit on: its commit waits for the WAL
// flush); a POST is sent only after the commit holding its row returned. Its settle is a
// DELETE that rides the next INSERT's statement, or, with no INSERT to
// ride, commits pgFloorFlush later without waiting for the flush.

package main

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgFloorRow is the name of the PostgreSQL floor's row.
const pgFloorRow = "pg floor POST"

// pgFloorFlush is how long a settle may wait for an INSERT to ride.
const pgFloorFlush = 10 * time.Millisecond

// pgFloorBatch bounds the rows of one INSERT, as pgjournal's createBatch.
const pgFloorBatch = 512

// pgFloor is the PostgreSQL floor's RoundTripper. It is safe for
// concurrent use.
type pgFloor struct {
	pool  *pgxpool.Pool
	table string // quoted schema.table
	base  http.RoundTripper

	q *groupCommitter[pgFloorPut, string] // write-aheads; settles are the keys to delete

	commits, writeAheads atomic.Uint64 // commits that wait for the WAL flush; rows inserted
}

// pgFloorPut is a write-ahead's row.
type pgFloorPut struct {
	key, method, url string
	body             []byte
}

// newPGFloor creates the floor's table in schema and starts its committer.
func newPGFloor(ctx context.Context, pool *pgxpool.Pool, schema string, base http.RoundTripper) (*pgFloor, error) {
	table := pgx.Identifier{schema, "pg_floor"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY, method text NOT NULL, url text NOT NULL, body bytea NOT NULL)`)
	if err != nil {
		return nil, err
	}
	f := &pgFloor{pool: pool, table: table, base: base}
	f.q = newGroupCommitter[pgFloorPut, string](pgFloorFlush, 0, func(bool) { f.commit() })
	return f, nil
}

func (f *pgFloor) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	key := rand.Text()
	if err := f.q.put(pgFloorPut{key: key, method: req.Method, url: req.URL.String(), body: body}); err != nil {
		return nil, err
	}
	resp, err := f.base.RoundTrip(withKey(req.Context(), req, key, body))
	if err == nil {
		f.q.settle(key)
	}
	return resp, err
}

// commit writes the queued puts (up to pgFloorBatch a statement) in one
// INSERT that also deletes the settled rows, and waits for its flush; with
// only deletes queued, it deletes them in a transaction that does not wait.
func (f *pgFloor) commit() {
	for {
		puts, deletes, more := f.q.take(pgFloorBatch)
		n := len(puts)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		switch {
		case n > 0:
			keys, methods, urls, bodies := make([]string, n), make([]string, n), make([]string, n), make([][]byte, n)
			for i, p := range puts {
				keys[i], methods[i], urls[i], bodies[i] = p.p.key, p.p.method, p.p.url, p.p.body
			}
			_, err := f.pool.Exec(ctx, `WITH settled AS (DELETE FROM `+f.table+` WHERE key = ANY($1))
				INSERT INTO `+f.table+` (key, method, url, body)
				SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[])`,
				deletes, keys, methods, urls, bodies)
			if err == nil {
				f.commits.Add(1)
				f.writeAheads.Add(uint64(n))
			}
			release(puts, err)
		case len(deletes) > 0:
			b := &pgx.Batch{}
			b.Queue(`BEGIN`)
			b.Queue(`SET LOCAL synchronous_commit = off`)
			b.Queue(`DELETE FROM `+f.table+` WHERE key = ANY($1)`, deletes)
			b.Queue(`COMMIT`)
			f.pool.SendBatch(ctx, b).Close() // a lost settle leaves a row behind: the floor never reads it
		}
		cancel()
		if !more {
			return
		}
	}
}

// stats returns the floor's counters so far.
func (f *pgFloor) stats() journalCounts {
	return journalCounts{commits: f.commits.Load(), writeAheads: f.writeAheads.Load()}
}

// Close commits what is queued and stops the committer; later calls do
// nothing. The pool is the caller's.
func (f *pgFloor) Close() { f.q.Close() }
