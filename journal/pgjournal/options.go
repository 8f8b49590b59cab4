// This file holds Options, how a PostgreSQL journal is opened.

package pgjournal

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/seal"
)

// Defaults for Options.
const (
	DefaultSchema    = "idem"
	DefaultNamespace = "default"
	DefaultLease     = 30 * time.Second
	DefaultRetention = 7 * 24 * time.Hour
)

// pruneEvery is how often a Journal prunes its namespace.
const pruneEvery = 10 * time.Minute

// Options configure a PostgreSQL journal. The zero value (or nil) works.
type Options struct {
	// Schema is the PostgreSQL schema that holds the tables: a plain
	// identifier (letters, digits, underscores, not starting with a digit,
	// at most 63 bytes). "" means DefaultSchema. Open creates it if needed.
	Schema string

	// Namespace names this journal among those sharing the tables: the
	// instances of one service share one namespace. Any UTF-8 text without
	// NUL, at most 255 bytes (PostgreSQL's text refuses NUL and invalid
	// UTF-8, and its indexes long entries). "" means DefaultNamespace.
	Namespace string

	// Lease is how long an operation stays leased to the instance sending
	// it without a renewal, on the database's clock. It bounds the time
	// from an instance's death to another's adoption of its operations.
	// 0 means DefaultLease; below one second is ErrInvalidOptions.
	Lease time.Duration

	// Retention is how long settled, failed and expired operations are
	// kept, by their last update, before a Journal prunes them: a third of
	// Lease after Open, then every 10 minutes, in batches of 1,000 rows.
	// Pending ones are never pruned. 0 means DefaultRetention;
	// idem.NewTransport raises it to its KeyTTL at least; negative is
	// ErrInvalidOptions.
	Retention time.Duration

	// Encryption, if set, seals what each new row holds of its request
	// (body, headers, URL query, body hash, identity, representation
	// headers) under its Current key with AES-256-GCM, and opens rows
	// sealed under any of its Keys: the same seal.Keyring, with the same
	// rules, as the bbolt journal's Options.Encryption (boltjournal.Keyring is
	// that type). A row keeps the key it was first sealed under; one whose
	// key this Keyring lacks is listed (Record.Sealed) but not read
	// (journal.ErrUnknownEncryptionKey), so never sent. Once a Journal
	// with Encryption has opened a namespace, a Journal without it writes
	// no new row there (journal.ErrInvalidOptions): it would be plaintext.
	// An invalid Keyring fails Open with journal.ErrInvalidOptions.
	Encryption *seal.Keyring

	local func() time.Time // the local clock; nil means time.Now (tests skew it)
	ring  *seal.Ring       // Encryption, built by resolved
}

// errNilPool is what Open and Migrate return for a nil pool, rather than
// panicking on its first use.
var errNilPool = fmt.Errorf("%w: nil *pgxpool.Pool", journal.ErrInvalidOptions)

// errNilContext refuses a nil context.Context, which pgx would dereference.
var errNilContext = fmt.Errorf("%w: nil context", journal.ErrInvalidOptions)

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func (o *Options) resolved() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.local == nil {
		c.local = time.Now
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	switch {
	case !identifier.MatchString(c.Schema):
		return c, fmt.Errorf("%w: Schema %q is not a plain identifier", journal.ErrInvalidOptions, c.Schema)
	case len(c.Namespace) > 255 || !utf8.ValidString(c.Namespace) || strings.ContainsRune(c.Namespace, 0):
		return c, fmt.Errorf("%w: Namespace %q is not UTF-8 text without NUL of at most 255 bytes",
			journal.ErrInvalidOptions, c.Namespace[:min(len(c.Namespace), 64)])
	case c.Retention < 0:
		return c, fmt.Errorf("%w: Retention %v is negative", journal.ErrInvalidOptions, c.Retention)
	case c.Lease < time.Second:
		return c, fmt.Errorf("%w: Lease %v is below one second", journal.ErrInvalidOptions, c.Lease)
	}
	var err error
	c.ring, err = seal.NewRing(c.Encryption)
	return c, err
}
