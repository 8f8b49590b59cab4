// This file holds the PostgreSQL floor client: the least a durable
// PostgreSQL write-ahead client can do with pgx v5, measured in the same
// rounds as idem over pgjournal (postgres.go). One committer goroutine
// writes every write-ahead queued at that moment in one multi-row INSERT
// (synchronous_commit on: its commit waits for the WAL flush); a POST is
// sent only after the commit holding its row returned. Its settle is a
// DELETE that rides the next INSERT's statement, or, with no INSERT to
// ride, commits pgFloorFlush later without waiting for the flush.

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"sync"
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

	mu      sync.Mutex
	puts    []pgFloorPut
	deletes []string
	wake    chan struct{} // one token: a put waits
	armed   chan struct{} // one token: a first delete waits, flush within pgFloorFlush
	stop    chan struct{}
	done    chan struct{}

	commits, writeAheads atomic.Uint64 // commits that wait for the WAL flush; rows inserted
	closeOnce            sync.Once
}

type pgFloorPut struct {
	key, method, url string
	body             []byte
	done             chan error
}

// newPGFloor creates the floor's table in schema and starts its committer.
func newPGFloor(ctx context.Context, pool *pgxpool.Pool, schema string, base http.RoundTripper) (*pgFloor, error) {
	table := pgx.Identifier{schema, "pg_floor"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY, method text NOT NULL, url text NOT NULL, body bytea NOT NULL)`)
	if err != nil {
		return nil, err
	}
	f := &pgFloor{pool: pool, table: table, base: base, wake: make(chan struct{}, 1), armed: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go f.commitLoop()
	return f, nil
}

func (f *pgFloor) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	key := rand.Text()
	if err := f.put(key, req.Method, req.URL.String(), body); err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set("Idempotency-Key", key)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	resp, err := f.base.RoundTrip(out)
	if err == nil {
		f.settle(key)
	}
	return resp, err
}

// put queues a write-ahead and waits for the commit that carries it.
func (f *pgFloor) put(key, method, url string, body []byte) error {
	done := make(chan error, 1)
	f.mu.Lock()
	f.puts = append(f.puts, pgFloorPut{key: key, method: method, url: url, body: body, done: done})
	f.mu.Unlock()
	poke(f.wake)
	return <-done
}

// settle queues the delete of key for the next statement.
func (f *pgFloor) settle(key string) {
	f.mu.Lock()
	f.deletes = append(f.deletes, key)
	first := len(f.deletes) == 1
	f.mu.Unlock()
	if first {
		poke(f.armed)
	}
}

// commitLoop writes whatever is queued as soon as there is a put, or
// pgFloorFlush after a delete with no put to ride.
func (f *pgFloor) commitLoop() {
	defer close(f.done)
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	for {
		select {
		case <-f.wake:
			f.commit()
		case <-f.armed:
			flush.Reset(pgFloorFlush)
		case <-flush.C:
			f.commit()
		case <-f.stop:
			f.commit()
			return
		}
	}
}

// commit writes the queued puts (up to pgFloorBatch a statement) in one
// INSERT that also deletes the settled rows, and waits for its flush; with
// only deletes queued, it deletes them in a transaction that does not wait.
func (f *pgFloor) commit() {
	for {
		f.mu.Lock()
		n := min(len(f.puts), pgFloorBatch)
		puts, deletes := f.puts[:n:n], f.deletes
		f.puts, f.deletes = f.puts[n:], nil
		more := len(f.puts) > 0
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		switch {
		case n > 0:
			keys, methods, urls, bodies := make([]string, n), make([]string, n), make([]string, n), make([][]byte, n)
			for i, p := range puts {
				keys[i], methods[i], urls[i], bodies[i] = p.key, p.method, p.url, p.body
			}
			_, err := f.pool.Exec(ctx, `WITH settled AS (DELETE FROM `+f.table+` WHERE key = ANY($1))
				INSERT INTO `+f.table+` (key, method, url, body)
				SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[])`,
				deletes, keys, methods, urls, bodies)
			if err == nil {
				f.commits.Add(1)
				f.writeAheads.Add(uint64(n))
			}
			for _, p := range puts {
				p.done <- err
			}
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
func (f *pgFloor) Close() {
	f.closeOnce.Do(func() {
		close(f.stop)
		<-f.done
	})
}
