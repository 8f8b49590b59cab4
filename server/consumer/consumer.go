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
	"github.com/idem-go/idem/server/internal/lease"
)

// Defaults for Options.
const (
	DefaultLease        = 30 * time.Second
	DefaultTTL          = 7 * 24 * time.Hour
	DefaultStoreTimeout = 2 * time.Second // cut to Lease/4 for shorter leases
)

// maxIDBytes bounds a message ID and a queue name.
const maxIDBytes = 1024

// Errors.
var (
	// ErrNoStore is returned by New when Options.Store is nil.
	ErrNoStore = errors.New("consumer: Options.Store is nil")
	// ErrInvalidOptions is wrapped by New's error for an option out of range.
	ErrInvalidOptions = errors.New("consumer: invalid options")
	// ErrInvalidMessage is returned by Process, which then does nothing, for an empty or
	// oversized (over 1,024 bytes) queue name or message ID.
	ErrInvalidMessage = errors.New("consumer: invalid queue name or message ID")
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
	// renewed every Lease/3. 0 means DefaultLease; below 10 ms is ErrInvalidOptions.
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
	// StoreTimeout bounds every call to the Store; a call that takes longer has an
	// unknown outcome and is repeated with the same token (see the package doc). 0 means
	// DefaultStoreTimeout, or Lease/4 if shorter; more than Lease/4 is ErrInvalidOptions.
	StoreTimeout time.Duration
	// Logger gets warnings (a lost lease, a release that failed); nil means quiet.
	Logger *slog.Logger
}

// Processor runs handlers at most once per message of its group. It is safe for
// concurrent use.
type Processor struct {
	o       Options
	repeats *lease.Repeater
	clock   lease.Clock // the time of the claims' leases: their send times and keepers
}

// New returns a Processor for opts. It returns ErrNoStore if opts or opts.Store is nil,
// and an error wrapping ErrInvalidOptions for an option out of range.
func New(opts *Options) (*Processor, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Store == nil:
		return nil, ErrNoStore
	case o.Lease < 0 || o.Lease > 0 && o.Lease < 10*time.Millisecond || o.TTL < 0 || o.StoreTimeout < 0:
		return nil, fmt.Errorf("%w: Lease %v, TTL %v, StoreTimeout %v", ErrInvalidOptions, o.Lease, o.TTL, o.StoreTimeout)
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.StoreTimeout == 0 {
		o.StoreTimeout = min(DefaultStoreTimeout, o.Lease/4)
	}
	if o.StoreTimeout > o.Lease/4 {
		return nil, fmt.Errorf("%w: StoreTimeout %v is longer than a quarter of Lease %v", ErrInvalidOptions, o.StoreTimeout, o.Lease)
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.TTL < o.Lease {
		return nil, fmt.Errorf("%w: TTL %v is shorter than Lease %v", ErrInvalidOptions, o.TTL, o.Lease)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Processor{o: o, repeats: lease.NewRepeater(maxRepeats, o.StoreTimeout, o.Lease/4,
		func(err error) bool { return errors.Is(err, server.ErrLeaseLost) }), clock: lease.System}, nil
}

// Shutdown waits, until ctx ends, for the Store calls the Processor is repeating in the
// background (a done-mark or release whose reply was lost, the release of a claim whose
// reply was lost) to land; then it gives up those left, whose messages are recovered like
// a dead consumer's, and returns ctx's error. Call it once the consumer stopped taking
// deliveries. The Processor still works afterwards, but repeats nothing.
func (p *Processor) Shutdown(ctx context.Context) error {
	return p.repeats.Shutdown(ctx)
}

// maxRepeats bounds the Store calls with an unknown outcome repeated at once; past it, a
// claim is left to lapse, and its message to be recovered like a dead consumer's.
const maxRepeats = 10_000

// claimTries is how many times one claim is sent with its token before Process gives up.
const claimTries = 3

// doneMark is what a done message's record holds.
var doneMark = &server.Response{Status: 200}

// Process runs handle for the message id of queue unless the group has processed it, and
// says what to tell the broker. handle's ctx carries the claim (HoldFrom) and is cancelled
// if the claim is lost (cause server.ErrLeaseLost) or its lease cannot be confirmed in
// time (server.ErrLeaseUnconfirmed). An error means the Store did not answer (the call is
// then repeated in the background, so that the redelivery finds the message released or
// done), ctx had ended before the claim, or a bad message.
func (p *Processor) Process(ctx context.Context, queue, id string, handle func(ctx context.Context) error) (Result, error) {
	if queue == "" || id == "" || len(queue) > maxIDBytes || len(id) > maxIDBytes {
		return 0, ErrInvalidMessage
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	sc := server.Scope{Identity: p.o.Group, Method: "MESSAGE", Path: queue, Key: id}
	// The claim is made without ctx's cancellation, as the middleware's is: a claim that
	// ctx cut off after the Store made it would leave the message held by no one, Busy
	// to every redelivery. If ctx ended meanwhile, the handler sees it and the claim is
	// released when it returns.
	token := server.NewToken()
	c, sent, err := p.claim(ctx, sc, token)
	if err != nil {
		// The claim may have landed: release it once the Store answers again, so that the
		// redelivery is not Busy for a handler that never ran.
		p.repeat(ctx, "release", sent.Add(p.o.TTL), func(ctx context.Context) error {
			return p.o.Store.Release(ctx, sc, token)
		})
		return 0, fmt.Errorf("consumer: claim %s/%s: %w", queue, id, err)
	}
	if !c.Claimed {
		switch rec := c.Record; {
		case rec.State == server.StateDone:
			return Duplicate, nil
		case rec.LeaseLeft > 0:
			return Busy, nil
		}
		res, tok, at, err := p.abandoned(ctx, sc, c.Record.Token, Message{Queue: queue, ID: id})
		if err != nil || res != 0 {
			return res, err
		}
		token, sent = tok, at
	}
	return p.run(ctx, sc, token, sent, handle)
}

// claim sends the claim of sc under token up to claimTries times until the Store answers,
// and returns its answer and when the first call that may have made it was sent.
func (p *Processor) claim(ctx context.Context, sc server.Scope, token string) (server.Claim, time.Time, error) {
	first := p.clock.Now()
	var err error
	for range claimTries {
		var c server.Claim
		err = p.call(ctx, func(ctx context.Context) error {
			var err error
			c, err = p.o.Store.Claim(ctx, sc, token, "", p.o.Lease, p.o.TTL)
			return err
		})
		if err == nil {
			return c, first, nil
		}
	}
	return server.Claim{}, first, err
}

// call calls f with ctx's values, not its cancellation, bounded by StoreTimeout.
func (p *Processor) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.o.StoreTimeout)
	defer cancel()
	return f(ctx)
}

// repeat repeats f, a call whose outcome is unknown, in the background until it lands,
// is refused, or until passes, and logs how it ended.
func (p *Processor) repeat(ctx context.Context, call string, until time.Time, f func(context.Context) error) {
	end := func(res lease.Result, err error) {
		switch res {
		case lease.Landed:
			p.o.Logger.Info("consumer: a repeated store call landed", "call", call)
		case lease.Refused:
			p.o.Logger.Info("consumer: a repeated store call was refused: another consumer has the message, or it is done", "call", call)
		default:
			p.o.Logger.Error("consumer: a store call got no answer in time; the message is left to lapse and be recovered", "call", call, "err", err)
		}
	}
	if !p.repeats.Start(ctx, until, f, end) {
		end(lease.GaveUp, errors.New("consumer: too many store calls being repeated"))
	}
}

// abandoned handles a message whose holder's lease lapsed: it returns a Result to give
// now, or 0, the token of a take-over to run the message under and when that take-over
// was sent (its lease cannot end before that time + Lease).
func (p *Processor) abandoned(ctx context.Context, sc server.Scope, stale string, m Message) (Result, string, time.Time, error) {
	d := Undecided
	switch {
	case p.o.RerunAbandoned:
		d = Rerun
	case p.o.Recover != nil:
		var err error
		if d, err = p.o.Recover(ctx, m); err != nil {
			p.o.Logger.Warn("consumer: Recover failed; the message stays busy", "queue", m.Queue, "err", err)
			return Busy, "", time.Time{}, nil
		}
	}
	if d != Done && d != Rerun {
		return Busy, "", time.Time{}, nil
	}
	token, sent := server.NewToken(), p.clock.Now()
	err := p.call(ctx, func(ctx context.Context) error { return p.o.Store.TakeOver(ctx, sc, stale, token, p.o.Lease) })
	switch {
	case errors.Is(err, server.ErrLeaseLost):
		return Busy, "", time.Time{}, nil // another consumer took it over first
	case err != nil:
		// A take-over whose reply was lost lapses unrenewed, as a dead consumer's claim.
		return 0, "", time.Time{}, fmt.Errorf("consumer: take over %s/%s: %w", m.Queue, m.ID, err)
	case d == Rerun:
		return 0, token, sent, nil
	}
	if err := p.call(ctx, func(ctx context.Context) error { return p.o.Store.Complete(ctx, sc, token, doneMark, p.o.TTL) }); err != nil {
		return 0, "", time.Time{}, fmt.Errorf("consumer: mark %s/%s done: %w", m.Queue, m.ID, err)
	}
	return Duplicate, "", time.Time{}, nil
}

// run runs handle under token (its lease confirmed at sent), then marks the message done
// or releases it.
func (p *Processor) run(ctx context.Context, sc server.Scope, token string, sent time.Time, handle func(context.Context) error) (Result, error) {
	h := &hold{Hold: server.Hold{Scope: sc, Token: token}}
	hctx, cancel := context.WithCancelCause(context.WithValue(ctx, holdKey{}, h))
	defer cancel(nil)
	k := p.keep(hctx, sc, token, sent, h, cancel)
	defer k.Stop() // a panicking handler's claim is left to lapse
	herr := handle(hctx)
	k.Stop()
	until := sent.Add(p.o.TTL)
	if herr != nil {
		release := func(ctx context.Context) error { return p.o.Store.Release(ctx, sc, token) }
		if err := p.call(ctx, release); err != nil && !errors.Is(err, server.ErrLeaseLost) {
			// Repeated until it lands: the redelivery is Busy until then.
			p.o.Logger.Warn("consumer: release got no answer; repeating", "queue", sc.Path, "err", err)
			p.repeat(ctx, "release", until, release)
		}
		return Failed, herr
	}
	complete := func(ctx context.Context) error { return p.o.Store.Complete(ctx, sc, token, doneMark, p.o.TTL) }
	err := p.call(ctx, complete)
	switch {
	case err == nil, errors.Is(err, server.ErrLeaseLost) && h.marked.Load():
		return Processed, nil // marked here, or in the handler's own transaction
	case errors.Is(err, server.ErrLeaseLost):
		// Another consumer took the message over while this one ran past its lease.
		p.o.Logger.Warn("consumer: lease lost while the handler ran; not marked done here", "queue", sc.Path)
		return Processed, fmt.Errorf("consumer: %s/%s: %w", sc.Path, sc.Key, server.ErrLeaseLost)
	}
	// Repeated until it lands: the redelivery is Busy until then, and Duplicate after.
	p.repeat(ctx, "complete", until, complete)
	return 0, fmt.Errorf("consumer: mark %s/%s done (repeating in the background): %w", sc.Path, sc.Key, err)
}
