// This file holds Outbox.Run: the sender woken by each commit that
// enqueued (LISTEN/NOTIFY), with polling as the fallback.

package pgjournal

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPollInterval is Run's polling interval when none is given.
const DefaultPollInterval = time.Second

// Run calls send, typically a Transport's Resume, at once, then each time
// a transaction that enqueued on this journal's namespace commits (on any
// instance), and at least every poll (0 means DefaultPollInterval), until
// ctx ends; it returns ctx's error. It listens on a connection of its own,
// taken from the pool and closed when Run returns; while that connection
// is lost, Run polls and tries again every poll. send's errors are its
// own to report: Run calls it again at the next wake-up.
func (o *Outbox) Run(ctx context.Context, poll time.Duration, send func(context.Context) error) error {
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		if conn == nil {
			conn = o.listen(ctx) // before send: a commit after send's pass wakes it
		}
		send(ctx)
		if conn == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(poll):
			}
			continue
		}
		wait, cancel := context.WithTimeout(ctx, poll)
		_, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && (!errors.Is(err, context.DeadlineExceeded) || conn.IsClosed()):
			conn.Close(context.Background()) // lost: listen again on a fresh connection
			conn = nil
		}
	}
}

// listen takes a connection from the pool for Run alone and listens on the
// namespace's channel; nil if it cannot.
func (o *Outbox) listen(ctx context.Context) *pgx.Conn {
	pc, err := o.j.pool.Acquire(ctx)
	if err != nil {
		return nil
	}
	conn := pc.Hijack() // its LISTEN must not go back to the pool
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{o.j.channel()}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil
	}
	return conn
}
