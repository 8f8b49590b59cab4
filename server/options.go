// options.go holds Options, the one way to configure the middleware, its defaults and the
// checks New runs on it.

package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"
)

// Defaults for the zero fields of Options.
const (
	DefaultKeyHeader        = "Idempotency-Key"
	DefaultPolicyHeader     = "Idempotency-Policy"
	DefaultMaxBodyBytes     = 1 << 20 // 1 MiB
	DefaultMaxResponseBytes = 1 << 20 // 1 MiB
	DefaultLease            = 30 * time.Second
	DefaultStoreTimeout     = 2 * time.Second // cut to Lease/4 for shorter leases
	DefaultTTL              = 24 * time.Hour
	DefaultPolicyURL        = "https://pkg.go.dev/github.com/idem-go/idem/server"
)

// DefaultMethods returns the methods the middleware covers when Options.Methods is nil: the
// two that RFC 9110 section 9.2.2 does not make idempotent. Each call returns a new slice.
func DefaultMethods() []string { return []string{http.MethodPost, http.MethodPatch} }

// DefaultUnstoredHeaders returns the response header fields that are never stored or replayed
// when Options.UnstoredHeaders is nil: a session cookie set for one request must not be
// handed to whoever replays it.
// Each call returns a new slice.
func DefaultUnstoredHeaders() []string { return []string{"Set-Cookie"} }

// Options configures the middleware. Only Store is required; every other zero value picks
// the documented default. New copies what it needs, so an Options may be reused, but the
// functions and the Store, Observer and Logger it holds are called from many goroutines at
// once and must be safe for that.
type Options struct {
	// Store holds the records, shared by every instance of the service. Required.
	Store Store

	// KeyHeader is the request header carrying the idempotency key; "" means
	// DefaultKeyHeader.
	KeyHeader string

	// Methods are the request methods the middleware covers; nil means DefaultMethods.
	// Other requests pass through untouched.
	Methods []string

	// Required makes a covered request without a key a 400; otherwise it passes through
	// without any idempotency (draft section 2.7 lets the server choose per operation).
	Required bool

	// Identity returns who sent r (a tenant, an account, an API key's ID): the same key
	// from another identity is another operation, and never sees this one's response. Only
	// a SHA-256 of what it returns is stored. An error answers 403 and runs nothing. nil
	// means a hash of the Authorization header ("" for none): a refreshed token is then a
	// new identity, so a service with accounts should set Identity. Under nil, a request
	// that carries cookies but no Authorization is refused (403): its users cannot be told
	// apart without Identity, and scoping by the cookies would let a changed cookie (a load
	// balancer's stickiness cookie changes on every response) run a retry again.
	Identity func(r *http.Request) (string, error)

	// Fingerprint returns the fingerprint of a request whose body was read in full: a
	// reused key with another fingerprint gets 422. An error answers 400 with the error's
	// text as the detail. nil means DefaultFingerprint.
	Fingerprint func(r *http.Request, body []byte) (string, error)

	// MaxBodyBytes bounds a covered request's body, which is read in full before the claim
	// (to fingerprint it) and handed to the handler from memory; a larger body gets 413.
	// 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// MaxResponseBytes bounds the body the middleware keeps for replay. A larger response
	// still reaches the client whole, but is stored as not replayable. 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64

	// Lease is how long a claim holds a key without a heartbeat; the middleware renews it
	// every Lease/3 while the handler runs. A holder that dies is noticed Lease after its
	// last heartbeat. 0 means DefaultLease.
	Lease time.Duration

	// TTL is how long a record is kept, from its completion (or its claim, for one stuck in
	// progress); then the key is new again (draft section 2.3). 0 means DefaultTTL.
	TTL time.Duration

	// Wait is how long a copy that finds its key in progress waits for the holder to
	// finish, polling the Store, before answering 409. 0 means answer 409 at once.
	Wait time.Duration

	// Recover decides about a record whose outcome is uncertain, for the first copy that
	// finds it so: one stuck in progress after its holder's lease lapsed (the holder
	// crashed or stalled), or one whose handler ended uncertain (an unexplained 5xx, a
	// panic: see Outcome), which is handed over at once. nil means no recovery: a stuck
	// key answers 409 until the record expires, and an uncertain answer is stored. See
	// RecoverInfo.
	Recover func(ctx context.Context, info RecoverInfo) (Recovery, error)

	// Classify says what an answer with this status means for its effect, when the
	// handler did not say (StoreResponse, DiscardResponse, MarkCompleted): stored
	// (OutcomeFinal), released for a retry to run again (OutcomeNoEffect), or uncertain
	// (OutcomeUncertain). nil means DefaultClassify; ClassifyTransactional releases 5xx
	// answers, for handlers whose effects roll back with their error.
	Classify func(status int) Outcome

	// StoreTimeout bounds every call to the Store (claims, renewals, completions,
	// releases, take-overs): a call that takes longer has an unknown outcome, and is
	// repeated with the same token (see the package doc). No client waits on a Store call
	// for longer after its handler returned. 0 means DefaultStoreTimeout, or Lease/4 if
	// that is shorter; it must not exceed Lease/4, so that a renewal's outcome is known
	// well before the lease ends.
	StoreTimeout time.Duration

	// UnstoredHeaders are response header fields never stored; nil means
	// DefaultUnstoredHeaders. Hop-by-hop fields (RFC 9110 section 7.6.1) are never stored.
	UnstoredHeaders []string

	// PolicyHeader is the response header advertising the policy on every covered
	// response; "" means DefaultPolicyHeader, "-" means none.
	PolicyHeader string

	// PolicyURL is the documentation of the service's idempotency policy: problem types
	// are PolicyURL#name and problem responses link to it (draft section 2.7). "" means
	// DefaultPolicyURL.
	PolicyURL string

	// Observer is told about claims, replays, conflicts and the rest; nil means none.
	Observer Observer

	// Logger receives store errors, lost leases and recoveries; nil means quiet.
	Logger *slog.Logger
}

// config is Options with the defaults filled in and lookups prepared.
type config struct {
	Options
	methods  map[string]bool
	unstored map[string]bool
	policy   string // the policy header's value
}

// resolve checks o and fills in the defaults.
func resolve(o Options) (*config, error) {
	if o.Store == nil {
		return nil, ErrNoStore
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.MaxBodyBytes < 0, o.MaxResponseBytes < 0:
		return nil, bad("MaxBodyBytes and MaxResponseBytes must not be negative")
	case o.Lease < 0, o.TTL < 0, o.Wait < 0, o.StoreTimeout < 0:
		return nil, bad("Lease, TTL, Wait and StoreTimeout must not be negative")
	}
	c := &config{Options: o, methods: map[string]bool{}, unstored: map[string]bool{}}
	c.KeyHeader = orDefault(c.KeyHeader, DefaultKeyHeader)
	c.PolicyHeader = orDefault(c.PolicyHeader, DefaultPolicyHeader)
	c.PolicyURL = orDefault(c.PolicyURL, DefaultPolicyURL)
	for _, h := range []string{c.KeyHeader, c.PolicyHeader} {
		if h != "-" && !validToken(h) {
			return nil, bad("header name %q is not an RFC 9110 token", h)
		}
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < c.Lease {
		return nil, bad("TTL %v is shorter than Lease %v", c.TTL, c.Lease)
	}
	if c.Lease < 10*time.Millisecond {
		return nil, bad("Lease %v is shorter than 10ms", c.Lease)
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = min(DefaultStoreTimeout, c.Lease/4)
	}
	if c.StoreTimeout > c.Lease/4 {
		return nil, bad("StoreTimeout %v is longer than a quarter of Lease %v", c.StoreTimeout, c.Lease)
	}
	if c.Classify == nil {
		c.Classify = DefaultClassify
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	methods := c.Methods
	if methods == nil {
		methods = DefaultMethods()
	}
	for _, m := range methods {
		if !validToken(m) {
			return nil, bad("method %q is not an RFC 9110 token", m)
		}
		c.methods[m] = true
	}
	unstored := c.UnstoredHeaders
	if unstored == nil {
		unstored = DefaultUnstoredHeaders()
	}
	for _, h := range slices.Concat(unstored, hopByHop, []string{replayedHeader, c.PolicyHeader}) {
		c.unstored[textproto.CanonicalMIMEHeaderKey(h)] = true
	}
	c.policy = policyValue(c)
	return c, nil
}

// policyValue is the policy header's value, an RFC 8941 dictionary: the key header, the
// TTL in seconds, and whether a key is required.
func policyValue(c *config) string {
	req := "?0"
	if c.Required {
		req = "?1"
	}
	return fmt.Sprintf(`header=%q, ttl=%d, required=%s`,
		strings.ToLower(c.KeyHeader), int64(c.TTL/time.Second), req)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// validToken reports whether s is an RFC 9110 token (section 5.6.2), as header names and
// methods must be.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
