// This file holds Options, the one way to configure idem, its defaults, and
// the check that refuses values with no meaning (ErrInvalidOptions).

package idem

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
)

// Defaults used where an Options field is zero.
const (
	DefaultKeyHeader           = "Idempotency-Key"
	DefaultMaxBodyBytes        = 8 << 20 // 8 MiB
	DefaultKeyTTL              = 24 * time.Hour
	DefaultMaxAttempts         = 6
	DefaultInitialInterval     = 250 * time.Millisecond
	DefaultMultiplier          = 2.0
	DefaultRandomizationFactor = 0.5
	DefaultMaxInterval         = 30 * time.Second
	DefaultMaxRetryAfter       = 60 * time.Second
	DefaultAttemptTimeout      = 30 * time.Second
	DefaultResumeConcurrency   = 8
	DefaultResumeInterval      = 30 * time.Second
	DefaultCloseTimeout        = 5 * time.Second
)

// AttemptHeader is the request header that tells the server which attempt of
// how many it is receiving, in the form of the AWS SDKs' amz-sdk-request:
//
//	Idem-Attempt: attempt=2; max=6
//
// attempt counts from 1 within one call (or one Resume of the operation); max
// is that call's attempt limit (Options.MaxAttempts or WithMaxAttempts), or 1
// for a body sent once. It is set on each attempt only: never journaled, and
// not part of an operation's fingerprint. A caller's own header of this name
// is replaced. Options.DisableAttemptHeader leaves it out.
const AttemptHeader = "Idem-Attempt"

// DefaultMethods returns the methods journaled when Options.Methods is nil,
// POST and PATCH: the methods RFC 9110 section 9.2.2 does not define as
// idempotent. Each call returns a new slice, which the caller may change.
func DefaultMethods() []string { return []string{http.MethodPost, http.MethodPatch} }

// DefaultSensitiveHeaders returns the headers never written to the journal,
// whatever Options.SensitiveHeaders adds: Authorization, Proxy-Authorization
// and Cookie. Each call returns a new slice, which the caller may change.
func DefaultSensitiveHeaders() []string {
	return []string{"Authorization", "Proxy-Authorization", "Cookie"}
}

// Options configures a Client or Transport. The zero value (or a nil *Options)
// gives the defaults, the Default... constants: a zero field means its
// default, never "none". A negative duration, size or count, or a value
// outside a field's stated range, makes Open and NewTransport fail with
// ErrInvalidOptions naming the field. Options are read once, when the Client,
// Transport or Journal is built; changing them later has no effect.
type Options struct {
	// Base sends each attempt. Nil means a clone of http.DefaultTransport
	// with CheckProxyConnect installed. A Base given here is never modified:
	// an *http.Transport with a Proxy is used through a clone
	// (http.Transport.Clone) with CheckProxyConnect installed after any
	// OnProxyConnectResponse of yours. The clone has its own connection pool
	// and per-host limits; your Transport's CloseIdleConnections and later
	// changes do not reach it (idem's CloseIdleConnections does). Any other
	// Base is used as it is; one that wraps an *http.Transport needs
	// CheckProxyConnect installed for a refused CONNECT to be typed.
	Base http.RoundTripper

	// Methods lists the methods that are journaled and keyed. Nil means
	// DefaultMethods() (POST, PATCH). Other methods are retried but not
	// journaled, unless the request context carries WithOperationID or
	// WithKey.
	Methods []string

	// KeyHeader is the idempotency key header. "" means DefaultKeyHeader.
	KeyHeader string

	// SensitiveHeaders are added to DefaultSensitiveHeaders(); none of them
	// is ever written to the journal. On Resume they come back from
	// PrepareResume.
	SensitiveHeaders []string

	// SensitiveQueryParams names URL query parameters never written to the
	// journal (an API token, a signature), matched as url.Values keys:
	// case-sensitive, after percent-decoding. They are cut from Record.URL,
	// the others keeping their bytes and order; Record.DroppedQuery keeps
	// their names, never their values. The request is sent with its URL
	// untouched. On Resume, PrepareResume must put them back in
	// req.URL.RawQuery (where it likes: positions are not kept), or the
	// operation stays pending with ErrSensitiveQueryMissing. The fingerprint
	// (ErrKeyReuse) leaves them out. Nil names none; an empty name is
	// ErrInvalidOptions. (The URL's fragment is never journaled.)
	SensitiveQueryParams []string

	// Journal configures the bbolt journal that Open opens: encryption at
	// rest, Retention (raised to KeyTTL at least), the file-lock timeout
	// (boltjournal.Options). NewTransport, whose Store was configured when
	// opened, refuses a non-zero Journal (ErrInvalidOptions).
	Journal boltjournal.Options

	// MaxBodyBytes caps a journaled request body, in bytes. 0 means
	// DefaultMaxBodyBytes. A longer body fails with ErrBodyTooLarge.
	MaxBodyBytes int64

	// KeyTTL is how long the server is assumed to keep an idempotency key. A
	// pending operation older than this is not re-sent (ErrKeyExpired). 0 means
	// DefaultKeyTTL.
	KeyTTL time.Duration

	// MaxAttempts is the number of attempts per call (the first one included).
	// 0 means DefaultMaxAttempts.
	MaxAttempts int

	// InitialInterval, Multiplier, RandomizationFactor and MaxInterval shape the
	// exponential backoff (github.com/cenkalti/backoff/v4). Zero means the
	// Default value. Multiplier must be finite and at least 1,
	// RandomizationFactor in [0, 1] (1 spreads each wait over 0 to twice its
	// interval), else ErrInvalidOptions. MaxInterval is the longest wait:
	// jitter never passes it, and no wait is 0. InitialInterval also bounds
	// the short random wait after a Retry-After date in the past.
	InitialInterval     time.Duration
	Multiplier          float64
	RandomizationFactor float64
	MaxInterval         time.Duration

	// Backoff, if set, replaces the exponential backoff: Backoff(n) is the
	// wait after a retryable attempt n of a call (from 1; Resume counts its
	// sends from 1 too) and, after a call's last attempt, how long the
	// operation stays pending before Resume may send it. It must be safe for
	// concurrent use and should add its own jitter. Its result is kept in
	// (0, MaxInterval]: 0 or less means 1 ms (or MaxInterval, if shorter). A
	// server's Retry-After, up to MaxRetryAfter, wins over it. Multiplier or
	// RandomizationFactor set with Backoff is ErrInvalidOptions. Nil means
	// the exponential backoff.
	Backoff func(attempt int) time.Duration

	// MaxRetryAfter caps a server's Retry-After. When the server asks for
	// longer, the call returns a *PendingError at once and Resume honours the
	// server's time later. 0 means DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration

	// AttemptTimeout bounds each attempt, the sending of its body included,
	// until its response headers arrive; an attempt cut short (its cause
	// ErrAttemptTimeout) is retried like a lost connection: the server may
	// have acted. 0 means DefaultAttemptTimeout (30 s). There is no "no
	// limit": the request context bounds the whole call, and
	// WithAttemptTimeout sets another limit for one call.
	AttemptTimeout time.Duration

	// RetryBudget limits retries per host so that clients do not multiply a
	// server's outage; see RetryBudget. The zero value gives the defaults
	// (retries add at most 10% once a burst of 100 is spent).
	RetryBudget RetryBudget

	// Classifier decides what to do with each attempt's outcome. Nil means
	// DefaultClassifier.
	Classifier Classifier

	// PrepareResume, if set, is called on each request Resume rebuilds,
	// before it is sent, to put back what the journal does not keep:
	// sensitive headers (else ErrSensitiveHeaderMissing) and query
	// parameters, a Location's too (else ErrSensitiveQueryMissing). An error
	// leaves the operation pending and is reported. After a 307 or 308,
	// req.URL is the Location, perhaps on another host: add credentials only
	// for hosts that should get them. IdentityFrom(req.Context()) is the
	// operation's declared identity, if any. Resume trusts what it adds; only
	// Options.Identity, if set, is asked again (ErrIdentityMismatch).
	PrepareResume func(*http.Request) error

	// Reconcile, if set, is asked whether a journaled operation happened
	// before idem re-sends one an earlier attempt may have reached (written,
	// with no final answer), and before giving up on one older than KeyTTL;
	// never before a first attempt, nor after attempts that provably never
	// left. It runs under the operation's claim (never twice at once for one
	// operation in one process; in a fleet, an instance stalled past its
	// lease may still have an attempt in flight) and after the identity
	// check. Set it for a server that ignores idempotency keys or keeps them
	// for less than KeyTTL. See Reconciler. WithReconcile, per call, is not
	// journaled: set this wherever the operation may be resumed.
	Reconcile Reconciler

	// Identity, if set, maps a journaled request to the identity it is made
	// for: a tenant, customer or account, never a credential (it is
	// journaled as given, sealed under Encryption). It is called once per
	// journaled call, before anything is written or sent, and must not read
	// the body; its error fails the call, and "" declares none. Where it and
	// WithIdentity both declare one, they must be equal (ErrInvalidRequest).
	//
	// An operation is bound to the identity it was created under: a call
	// under another that names it (operation ID or caller's key) fails with
	// ErrIdentityMismatch, nothing sent, even after a restart. With none
	// declared, the identity is the creator's credentials (sensitive header
	// values, URL userinfo, SensitiveQueryParams), journaled only as a keyed
	// hash (Record.CredentialTag): a call with other credentials (a
	// refreshed token, a rotated cookie such as a load balancer's sticky
	// one) is refused, and credentials added below idem (by Base, a TLS
	// client certificate) are not seen; declare the identity then. Operation
	// IDs and caller's keys are one namespace per journal: prefix them with
	// the tenant where tenants choose them. Resume asks Identity again on
	// the request PrepareResume prepared (ErrIdentityMismatch).
	Identity func(*http.Request) (string, error)

	// ResumeConcurrency bounds the operations Resume sends at once. 0 means
	// DefaultResumeConcurrency.
	ResumeConcurrency int

	// ResumeInterval is the longest a background resumer (Client.StartResumer)
	// waits between two passes over the journal. It wakes earlier when a
	// pending operation's next-attempt time comes. 0 means
	// DefaultResumeInterval.
	ResumeInterval time.Duration

	// CloseTimeout bounds how long Client.Close, and a resumer's stop
	// function, wait for the operations a background resumer is sending.
	// When it passes, their attempts are canceled and they stay pending. 0
	// means DefaultCloseTimeout.
	CloseTimeout time.Duration

	// DisableAttemptHeader leaves out the AttemptHeader ("Idem-Attempt:
	// attempt=N; max=M") that every attempt carries by default.
	DisableAttemptHeader bool

	// Logger receives one record per retry (Info), per operation left
	// pending (Warn) and per resume outcome (Info; Warn if still pending,
	// Error if expired). Nil means silent. Records carry the method, the URL
	// without userinfo or query, the idempotency key and operation ID; never
	// a body or a header value, and error texts have the URL's userinfo and
	// query and the sensitive header values masked.
	Logger *slog.Logger

	// Observer receives every attempt, retry, write-ahead and operation
	// result, for metrics (see Observer, and the module
	// github.com/idem-go/idem/idemotel for OpenTelemetry). Nil means none.
	Observer Observer
}

// config is Options with every default filled in and the inputs checked.
type config struct {
	Options
	methods        map[string]bool
	sensitive      map[string]bool
	sensitiveQuery map[string]bool
	observer       Observer // never nil
	// defaultClassifier is set when Options.Classifier was nil.
	defaultClassifier bool
}

func (o *Options) config() (*config, error) {
	c := &config{}
	if o != nil {
		c.Options = *o
	}
	if err := c.Options.check(); err != nil {
		return nil, err
	}
	setDefault(&c.KeyHeader, DefaultKeyHeader)
	setDefault(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&c.KeyTTL, DefaultKeyTTL)
	setDefault(&c.MaxAttempts, DefaultMaxAttempts)
	setDefault(&c.InitialInterval, DefaultInitialInterval)
	setDefault(&c.Multiplier, DefaultMultiplier)
	setDefault(&c.RandomizationFactor, DefaultRandomizationFactor)
	setDefault(&c.MaxInterval, DefaultMaxInterval)
	setDefault(&c.MaxRetryAfter, DefaultMaxRetryAfter)
	setDefault(&c.AttemptTimeout, DefaultAttemptTimeout)
	setDefault(&c.ResumeConcurrency, DefaultResumeConcurrency)
	setDefault(&c.ResumeInterval, DefaultResumeInterval)
	setDefault(&c.CloseTimeout, DefaultCloseTimeout)
	if err := c.RetryBudget.check(); err != nil {
		return nil, err
	}
	setDefault(&c.RetryBudget.Ratio, DefaultRetryRatio)
	setDefault(&c.RetryBudget.Burst, DefaultRetryBurst)
	if c.Classifier == nil {
		c.Classifier, c.defaultClassifier = DefaultClassifier, true
	}
	c.observer = c.Observer
	if c.observer == nil {
		c.observer = NopObserver{}
	}
	if c.InitialInterval > c.MaxInterval {
		c.InitialInterval = c.MaxInterval
	}
	methods := c.Methods
	if methods == nil {
		methods = DefaultMethods()
	}
	c.methods = make(map[string]bool, len(methods))
	for _, m := range methods {
		c.methods[m] = true
	}
	c.sensitive = make(map[string]bool)
	for _, h := range append(DefaultSensitiveHeaders(), c.SensitiveHeaders...) {
		c.sensitive[http.CanonicalHeaderKey(h)] = true
	}
	c.sensitiveQuery = make(map[string]bool, len(c.SensitiveQueryParams))
	for _, name := range c.SensitiveQueryParams {
		c.sensitiveQuery[name] = true
	}
	if err := c.Journal.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// check returns the first field of o that holds a value with no meaning.
func (o *Options) check() error {
	if err := cmp.Or(
		notNegative("MaxBodyBytes", o.MaxBodyBytes),
		notNegative("KeyTTL", o.KeyTTL),
		notNegative("MaxAttempts", o.MaxAttempts),
		notNegative("InitialInterval", o.InitialInterval),
		notNegative("MaxInterval", o.MaxInterval),
		notNegative("MaxRetryAfter", o.MaxRetryAfter),
		notNegative("AttemptTimeout", o.AttemptTimeout),
		notNegative("ResumeConcurrency", o.ResumeConcurrency),
		notNegative("ResumeInterval", o.ResumeInterval),
		notNegative("CloseTimeout", o.CloseTimeout),
	); err != nil {
		return err
	}
	// Written so that NaN fails too: every comparison with NaN is false.
	if m := o.Multiplier; m != 0 && !(m >= 1 && !math.IsInf(m, 1)) {
		return fmt.Errorf("%w: Multiplier %v is not a finite number >= 1", ErrInvalidOptions, m)
	}
	if f := o.RandomizationFactor; !(f >= 0 && f <= 1) {
		return fmt.Errorf("%w: RandomizationFactor %v is outside [0, 1]", ErrInvalidOptions, f)
	}
	// Backoff replaces the schedule they shape: refuse rather than ignore.
	if o.Backoff != nil && (o.Multiplier != 0 || o.RandomizationFactor != 0) {
		return fmt.Errorf("%w: Backoff replaces the exponential backoff: Multiplier %v and RandomizationFactor %v must be zero",
			ErrInvalidOptions, o.Multiplier, o.RandomizationFactor)
	}
	// An empty name matches "a=1&&b=2"'s empty part, which no PrepareResume can put back.
	if slices.Contains(o.SensitiveQueryParams, "") {
		return fmt.Errorf("%w: SensitiveQueryParams holds an empty name", ErrInvalidOptions)
	}
	// net/http would refuse it after the write-ahead, leaving calls pending for good.
	if o.KeyHeader != "" && !isToken(o.KeyHeader) {
		return fmt.Errorf("%w: KeyHeader %q is not a valid header name", ErrInvalidOptions, o.KeyHeader)
	}
	return nil
}

func notNegative[T int | int64 | time.Duration](field string, v T) error {
	if v < 0 {
		return fmt.Errorf("%w: %s %v is negative", ErrInvalidOptions, field, v)
	}
	return nil
}
