// This file holds the one shape every group statement of the journal
// shares: the calls waiting at one moment queue, the first becomes the
// leader that writes them a batch at a time in one statement each, and
// each call waits for its own result. The statements are in create.go
// (write-aheads), lookup.go (Gets by operation ID) and leasebatch.go
// (leases by operation ID). Deferred settles, which no caller waits for,
// have a queue of their own (settles.go).

package pgjournal

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// group batches the calls of type T that give a result of type R, with
// K the type of the key that may not appear twice in one batch. It is
// safe for concurrent use once set up, and its zero value is not ready:
// call setup before the first do.
//
// What differs among the groups, on purpose, is set in setup or chosen by
// the caller of do:
//   - inline: the call that finds no batch under way writes the first
//     itself, saving a goroutine's wake-up when calls come one at a time,
//     and leaves what queued meanwhile to a goroutine, so that it waits
//     for its own batch only (write-aheads). Otherwise
//     every batch is written by a goroutine (look-ups, leases).
//   - key: a call whose key is already in the batch waits for the next
//     one (one UPDATE changes a row once: leases by operation ID). nil:
//     no such rule (write-aheads, where a unique
//     index settles a clash; look-ups, whose write answers a repeated ID
//     by a read of its own).
//   - the ctx given to do: a call stops waiting when it ends (look-ups,
//     leases; context.Background for write-aheads, which once queued are
//     committed or refused, never left in doubt by
//     one caller giving up). A call that stopped waiting leaves its result
//     in its buffered channel, unread: a lease taken for it runs out as
//     after a crash.
//
// Each batch runs under the deadline its write sets (Options.Lease in all
// three), never a caller's context.
type group[T any, K comparable, R any] struct {
	max    int                       // the calls of one batch, at most
	inline bool                      // the leader writes the first batch in its own goroutine
	key    func(*T) K                // nil: calls of one batch may share a key
	write  func(batch []*call[T, R]) // writes batch and answers each of its calls once

	mu      sync.Mutex
	queue   []*call[T, R]
	writing bool // a leader is writing the queue
}

// call is one call waiting in a group: its input and where its result
// goes.
type call[T, R any] struct {
	in  T
	out chan R // buffered: answer never blocks, even if the caller stopped waiting
}

// answer gives c its result. A group's write calls it once for each call
// of its batch.
func (c *call[T, R]) answer(r R) { c.out <- r }

// setup sets what differs among the groups (see group). size, the calls
// of one batch at most, must be at least 1; write must answer every call
// of its batch once.
func (g *group[T, K, R]) setup(size int, inline bool, key func(*T) K, write func([]*call[T, R])) {
	g.max, g.inline, g.key, g.write = size, inline, key, write
}

// do queues in, becoming the leader if no batch is under way, and waits
// for its result or for ctx to end (then ok is false and r the zero R).
func (g *group[T, K, R]) do(ctx context.Context, in T) (r R, ok bool) {
	c := &call[T, R]{in: in, out: make(chan R, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.writing
	g.writing = true
	g.mu.Unlock()
	if lead {
		if g.inline {
			g.run(true)
		} else {
			go g.run(false)
		}
	}
	select {
	case r = <-c.out:
		return r, true
	case <-ctx.Done():
		return r, false
	}
}

// run writes the queue a batch at a time until it is empty. When inline,
// it writes one batch and hands what is left to a goroutine.
func (g *group[T, K, R]) run(inline bool) {
	wrote := false
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.writing = false
			g.mu.Unlock()
			return
		}
		if inline && wrote {
			g.mu.Unlock()
			go g.run(false)
			return
		}
		batch := g.next()
		g.mu.Unlock()
		g.write(batch)
		wrote = true
	}
}

// next takes the next batch off the queue, in queue order: at most max
// calls, none whose key is already in it. g.mu is held.
func (g *group[T, K, R]) next() []*call[T, R] {
	if g.key == nil {
		n := min(len(g.queue), g.max)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		return batch
	}
	seen := make(map[K]bool, min(len(g.queue), g.max))
	var batch, rest []*call[T, R]
	for _, c := range g.queue {
		if k := g.key(&c.in); len(batch) < g.max && !seen[k] {
			seen[k] = true
			batch = append(batch, c)
		} else {
			rest = append(rest, c)
		}
	}
	g.queue = rest
	return batch
}

// freshPlan runs a batch statement with a plan made for its values, never a generic plan
// cached while the table was small: with an array of rows to find, such a plan keeps
// scanning the whole table as it grows. pgx caches the statement's description only.
const freshPlan = pgx.QueryExecModeCacheDescribe
