// options.go holds Options, how a Store is opened, its defaults and the checks Open runs.

package pgstore

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/idem-go/idem/server"
)

// Defaults for the zero fields of Options.
const (
	DefaultSchema     = "idem"
	DefaultPruneEvery = 10 * time.Minute
	DefaultPruneBatch = 1000
	// DefaultStatementTimeout bounds each statement the Store runs on the pool.
	DefaultStatementTimeout = 2 * time.Second
)

// Options configure a Store. The zero value (or nil) works. Open copies it.
type Options struct {
	// Schema is the PostgreSQL schema that holds the table: a plain identifier (ASCII
	// letters, digits, underscores, not starting with a digit, at most 63 bytes, so it
	// never needs quoting rules explained). "" means DefaultSchema. Open creates it if
	// needed. It may be the schema of a journal/pgjournal journal: the names differ.
	Schema string

	// TTL is how long a record completed by CompleteTx is kept, from the completion. The middleware's own completions use server.Options.TTL, which this should
	// equal. 0 means server.DefaultTTL (24 h); negative is ErrInvalidOptions.
	TTL time.Duration

	// PruneEvery is how often the Store deletes expired rows in the background (the first
	// run one interval after Open). 0 means DefaultPruneEvery; negative turns the
	// background pruning off (call Prune yourself, e.g. from a cron job).
	PruneEvery time.Duration

	// PruneBatch is how many expired rows one DELETE removes: Prune repeats it until fewer
	// are left, so no statement holds many row locks or runs long. 0 means
	// DefaultPruneBatch; negative is ErrInvalidOptions.
	PruneBatch int

	// StatementTimeout is the lock_timeout and statement_timeout of every statement the
	// Store runs on the pool (set for that statement's transaction alone), so that a row
	// locked by a service's transaction, or a slow database, cannot hold pooled
	// connections for long: the statement fails instead, and the middleware answers 503 or
	// tries again. It does not apply inside CompleteTx, whose transaction is the service's.
	// If the pool's connections start with both timeouts set, above zero and no longer
	// than this (ConnConfig.RuntimeParams "lock_timeout" and "statement_timeout", e.g.
	// ?lock_timeout=2s&statement_timeout=2s in its URL), Open notices and the Store relies
	// on them, sending each statement alone: one statement fewer per call. A service that
	// then raises them on a pooled connection (SET without RESET) unbounds the Store.
	// 0 means DefaultStatementTimeout; negative is ErrInvalidOptions.
	StatementTimeout time.Duration

	// Logger receives the background pruning's failures (it tries again an interval
	// later); nil is quiet.
	Logger *slog.Logger
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// resolved returns o with its defaults filled in, or an error wrapping ErrInvalidOptions.
func (o *Options) resolved() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.TTL == 0 {
		c.TTL = server.DefaultTTL
	}
	if c.PruneEvery == 0 {
		c.PruneEvery = DefaultPruneEvery
	}
	if c.PruneBatch == 0 {
		c.PruneBatch = DefaultPruneBatch
	}
	if c.StatementTimeout == 0 {
		c.StatementTimeout = DefaultStatementTimeout
	}
	switch {
	case !identifier.MatchString(c.Schema):
		return c, fmt.Errorf("%w: Schema %q is not a plain identifier", ErrInvalidOptions, c.Schema)
	case c.TTL < 0:
		return c, fmt.Errorf("%w: TTL %v is negative", ErrInvalidOptions, c.TTL)
	case c.StatementTimeout < 0:
		return c, fmt.Errorf("%w: StatementTimeout %v is negative", ErrInvalidOptions, c.StatementTimeout)
	case c.PruneBatch < 0:
		return c, fmt.Errorf("%w: PruneBatch %d is negative", ErrInvalidOptions, c.PruneBatch)
	}
	return c, nil
}
