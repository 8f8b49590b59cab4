// This file holds the Processor: its options, and Process, which claims a message, runs the
// handler under a renewed lease (lease.go) and marks the message done or releases it.

package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idem-go/idem/server"
)

// Defaults for Options.
const (
	DefaultLease = 30 * time.Second
	DefaultTTL   = 7 * 24 * time.Hour
)

// maxIDBytes bounds a message ID and a queue name.
const maxIDBytes = 1024

// Errors.
var (
	// ErrNoStore is returned by New when Options.Store is nil.
	ErrNoStore = errors.New("consumer: Options.Store is nil")
	// ErrBadOptions is wrapped by New's error for an option out of range.
	ErrBadOptions = errors.New("consumer: invalid options")
	// ErrBadMessage is returned by Process, which then does nothing, for an empty or
	// oversized (over 1,024 bytes) queue name or message ID.
	ErrBadMessage = errors.New("consumer: invalid queue name or message ID")
)

// Result says what Process did and what to tell the broker (see the package doc).
type Result int

const (
	Processed Result = iota + 1 // ran now, marked done: ack
	Duplicate                   // done before: ack without running
	Busy                        // held by another consumer, or abandoned and undecided: do not ack
	Failed                      // the handler failed, the claim released: nack so it is redelivered
)

// String names r for logs.
func (r Result) String() string {
	switch r {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	case Busy:
		return "busy"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Decision is what Options.Recover decided for a message whose consumer died running it.
type Decision int

const (
	Undecided Decision = iota // not known yet: Busy now, asked again at the next delivery
	Done                      // the effect happened: mark the message done, do not run it
	Rerun                     // the effect did not happen: run the message again
)

// Message names one delivery for Recover.
type Message struct {
	Queue, ID string
}

// Options configure a Processor. Store is required; the zero value of the rest works.
type Options struct {
	// Store holds the claims, shared by every consumer of the group.
	Store server.Store
	// Group scopes message IDs: consumer groups that each process every message use
	// different groups. "" is a group of its own.
	Group string
	// Lease is how long a claim holds without renewal; a running handler's claim is
	// renewed every Lease/3. 0 means DefaultLease; below 10 ms is ErrBadOptions.
	Lease time.Duration
	// TTL is how long a done mark is kept: at least as long as the broker may redeliver a
	// message. 0 means DefaultTTL.
	TTL time.Duration
	// Recover decides for a message whose consumer died running it (its claim's lease
	// lapsed). nil means Undecided, until the record expires, unless RerunAbandoned.
	Recover func(ctx context.Context, m Message) (Decision, error)
	// RerunAbandoned runs such a message again without asking Recover: set it only when
	// the handler's effects and its done-mark commit in one transaction (MarkCompleted).
	RerunAbandoned bool
	// Logger gets warnings (a lost lease, a release that failed); nil means quiet.
	Logger *slog.Logger
}

// Processor runs handlers at most once per message of its group. It is safe for
// concurrent use.
type Processor struct {
	o Options
}

// New returns a Processor for opts.
func New(opts Options) (*Processor, error) {
	o := opts
	switch {
	case o.Store == nil:
		return nil, ErrNoStore
	case o.Lease < 0 || o.Lease > 0 && o.Lease < 10*time.Millisecond || o.TTL < 0:
		return nil, fmt.Errorf("%w: Lease %v, TTL %v", ErrBadOptions, o.Lease, o.TTL)
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Processor{o: o}, nil
}

// doneMark is what a done message's record holds.
var doneMark = &server.Response{Status: 200}

// Process runs handle for the message id of queue unless the group has processed it, and
// says what to tell the broker. handle's ctx carries the claim (HoldFrom) and is canceled
// if the claim is lost. An error means the Store could not answer, ctx had ended before
// the claim, or a bad message.
func (p *Processor) Process(ctx context.Context, queue, id string, handle func(ctx context.Context) error) (Result, error) {
	if queue == "" || id == "" || len(queue) > maxIDBytes || len(id) > maxIDBytes {
		return 0, ErrBadMessage
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	sc := server.Scope{Identity: p.o.Group, Method: "MESSAGE", Path: queue, Key: id}
	// The claim is made without ctx's cancellation, as the middleware's is: a claim that
	// ctx cut off after the Store made it would leave the message held by no one, Busy
	// to every redelivery. If ctx ended meanwhile, the handler sees it and the claim is
	// released when it returns.
	c, err := p.o.Store.Claim(context.WithoutCancel(ctx), sc, "", p.o.Lease, p.o.TTL)
	if err != nil {
		return 0, fmt.Errorf("consumer: claim %s/%s: %w", queue, id, err)
	}
	token := c.Token
	if !c.Claimed {
		switch rec := c.Record; {
		case rec.State == server.StateDone:
			return Duplicate, nil
		case rec.LeaseLeft > 0:
			return Busy, nil
		}
		res, tok, err := p.abandoned(ctx, sc, c.Record.Token, Message{Queue: queue, ID: id})
		if err != nil || res != 0 {
			return res, err
		}
		token = tok
	}
	return p.run(ctx, sc, token, handle)
}

// abandoned handles a message whose holder's lease lapsed: it returns a Result to give
// now, or 0 and the token of a take-over to run the message under.
func (p *Processor) abandoned(ctx context.Context, sc server.Scope, stale string, m Message) (Result, string, error) {
	d := Undecided
	switch {
	case p.o.RerunAbandoned:
		d = Rerun
	case p.o.Recover != nil:
		var err error
		if d, err = p.o.Recover(ctx, m); err != nil {
			p.o.Logger.Warn("consumer: Recover failed; the message stays busy", "queue", m.Queue, "err", err)
			return Busy, "", nil
		}
	}
	if d != Done && d != Rerun {
		return Busy, "", nil
	}
	token, err := p.o.Store.TakeOver(ctx, sc, stale, p.o.Lease)
	switch {
	case errors.Is(err, server.ErrLeaseLost):
		return Busy, "", nil // another consumer took it over first
	case err != nil:
		return 0, "", fmt.Errorf("consumer: take over %s/%s: %w", m.Queue, m.ID, err)
	case d == Rerun:
		return 0, token, nil
	}
	if err := p.o.Store.Complete(ctx, sc, token, doneMark, p.o.TTL); err != nil {
		return 0, "", fmt.Errorf("consumer: mark %s/%s done: %w", m.Queue, m.ID, err)
	}
	return Duplicate, "", nil
}

// run runs handle under token, then marks the message done or releases it.
func (p *Processor) run(ctx context.Context, sc server.Scope, token string, handle func(context.Context) error) (Result, error) {
	h := &hold{Hold: server.Hold{Scope: sc, Token: token}}
	hctx, cancel := context.WithCancelCause(context.WithValue(ctx, holdKey{}, h))
	defer cancel(nil)
	stop := p.heartbeat(hctx, sc, token, cancel)
	defer stop() // a panicking handler's claim is left to lapse
	herr := handle(hctx)
	stop()
	done := context.WithoutCancel(ctx) // the handler's work is done: record it even if ctx ended
	if herr != nil {
		if err := p.o.Store.Release(done, sc, token); err != nil {
			// The claim stays until its lease lapses; the redelivery is Busy until then.
			p.o.Logger.Warn("consumer: release failed", "queue", sc.Path, "err", err)
		}
		return Failed, herr
	}
	err := p.o.Store.Complete(done, sc, token, doneMark, p.o.TTL)
	switch {
	case err == nil, errors.Is(err, server.ErrLeaseLost) && h.marked.Load():
		return Processed, nil // marked here, or in the handler's own transaction
	case errors.Is(err, server.ErrLeaseLost):
		// Another consumer took the message over while this one ran past its lease.
		p.o.Logger.Warn("consumer: lease lost while the handler ran; not marked done here", "queue", sc.Path)
		return Processed, fmt.Errorf("consumer: %s/%s: %w", sc.Path, sc.Key, server.ErrLeaseLost)
	}
	return 0, fmt.Errorf("consumer: mark %s/%s done: %w", sc.Path, sc.Key, err)
}
