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
// for a body sent once. Across calls and restarts the idempotency key, not
// this header, identifies the operation. The header is set on each attempt
// only: it is never journaled and is not part of an operation's fingerprint,
// so the key and body stay byte-identical across attempts. A caller's own
// header of this name is replaced. Options.DisableAttemptHeader leaves it out.
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
// gives the defaults, the Default... constants (DefaultMaxAttempts 6,
// DefaultKeyTTL 24h, ...): a zero field means its default, never "none". A
// negative duration, size or count, or a value outside a field's stated range,
// makes Open and NewTransport fail with ErrInvalidOptions naming
// the field. Options are read once, when the Client, Transport or Journal is
// built; changing them later has no effect.
type Options struct {
	// Base sends each attempt. Nil means a clone of http.DefaultTransport
	// made by NewTransport, with CheckProxyConnect installed. idem never
	// modifies a Base given here. An *http.Transport with a Proxy is used
	// through a clone (http.Transport.Clone) that NewTransport makes with
	// CheckProxyConnect installed after any OnProxyConnectResponse of
	// yours, so that a proxy refusing CONNECT (a 407: wrong credentials)
	// fails the operation at once, as on the default base. The clone has
	// its own connection pool: it shares no connection with other users of
	// your Transport, its per-host limits (MaxConnsPerHost, ...) count
	// apart from theirs, your CloseIdleConnections does not reach it (the
	// Transport's does), and changes made to your Transport after
	// NewTransport do not reach it. Any other Base, including an
	// *http.Transport without a Proxy, is used as it is; a RoundTripper
	// that wraps an *http.Transport must have CheckProxyConnect installed
	// on it for a refused CONNECT to be typed.
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

	// SensitiveQueryParams names URL query parameters that are never written
	// to the journal (an API token, a signature), matched exactly as
	// url.Values keys: case-sensitive, after percent-decoding, in a query
	// split at '&' as url.ParseQuery splits it. They are cut from the
	// journaled URL (Record.URL), the other parameters keeping their bytes
	// and order; Record.DroppedQuery keeps their names, never their values.
	// The request itself is sent with its URL untouched. On Resume,
	// PrepareResume must put them back in req.URL.RawQuery, or the operation
	// stays pending and Resume reports ErrSensitiveQueryMissing; their
	// positions are not kept, so a resumed URL has them where PrepareResume
	// puts them (appended, say), which matters only to a server that
	// fingerprints the URL's bytes. The operation's fingerprint (ErrKeyReuse)
	// uses the URL without them: a call that repeats an operation ID with a
	// fresh token is the same request (the same operation under a declared
	// Identity; with none, a fresh token is other credentials).
	// Nil, the default, names none; an empty name is ErrInvalidOptions. (The
	// URL's fragment is never journaled: net/http never sends it.)
	SensitiveQueryParams []string

	// Journal configures the bbolt journal that Open opens: encryption at
	// rest, Retention, the file-lock timeout (boltjournal.Options). Open
	// raises Journal.Retention to KeyTTL at least. Only Open reads it:
	// NewTransport takes a Store already open, configured when it was
	// opened, and refuses a non-zero Journal (ErrInvalidOptions) rather
	// than leave, say, an Encryption keyring silently unused.
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
	// Default value. Multiplier must be finite and at least 1;
	// RandomizationFactor in [0, 1] (1 spreads each wait over 0 to twice its
	// interval). MaxInterval is the largest wait ever used: jitter never
	// pushes a wait past it, and no wait is ever 0. InitialInterval also
	// bounds the short random wait after a Retry-After date in the past.
	InitialInterval     time.Duration
	Multiplier          float64
	RandomizationFactor float64
	MaxInterval         time.Duration

	// Backoff, if set, replaces the exponential backoff: Backoff(n) is the
	// wait after attempt n of a call (from 1; Resume counts each of its
	// sends from 1 too) whose outcome is retryable, and, after a call's last
	// attempt, how long the operation stays pending before Resume may send
	// it. It is called from many calls at once, so it must be safe for
	// concurrent use, and it should add its own jitter, or clients retry in
	// step. Its result is kept in (0, MaxInterval], as every wait is: 0 or
	// less means 1 ms (or MaxInterval, if shorter), so that a retry never
	// comes at once, and more than MaxInterval means MaxInterval. A server's
	// Retry-After still wins over it, up to MaxRetryAfter. Multiplier and
	// RandomizationFactor shape only the exponential backoff: set with
	// Backoff, they fail Open and NewTransport with
	// ErrInvalidOptions rather than be ignored. Nil means the exponential
	// backoff.
	Backoff func(attempt int) time.Duration

	// MaxRetryAfter caps a server's Retry-After. When the server asks for
	// longer, the call returns a *PendingError at once and Resume honours the
	// server's time later. 0 means DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration

	// AttemptTimeout bounds each attempt, the sending of its body included,
	// until its response headers arrive; an attempt cut short is retried like a lost connection (the server may
	// have acted: same key, same bytes). 0 means DefaultAttemptTimeout, 30 s:
	// a payment API that has not begun to answer by then is not worth
	// holding a call, or one of Resume's slots, for, while a retry with the
	// same key will get its stored result (Stripe's client gives a whole
	// request 80 s). There is no "no limit": the request context bounds the
	// whole call, and WithAttemptTimeout sets a longer limit for one call.
	AttemptTimeout time.Duration

	// RetryBudget limits retries per host so that clients do not multiply a
	// server's outage; see RetryBudget. The zero value gives the defaults
	// (retries add at most 10% once a burst of 100 is spent).
	RetryBudget RetryBudget

	// Classifier decides what to do with each attempt's outcome. Nil means
	// DefaultClassifier.
	Classifier Classifier

	// PrepareResume, if set, is called on each request rebuilt by Resume before
	// it is sent, to add what the journal does not keep (credentials).
	// Returning an error leaves the operation pending and reports the error.
	// After a 307 or 308, req.URL is the Location, perhaps on another host:
	// add credentials only for hosts that should get them. A Location's
	// SensitiveQueryParams are not journaled either: put them back, or
	// Resume reports ErrSensitiveQueryMissing on every pass until KeyTTL.
	// IdentityFrom(req.Context()) is the identity the operation was created
	// under, if one was declared: add that identity's credentials. Resume
	// trusts what PrepareResume adds; only Options.Identity, if set, is
	// asked again (ErrIdentityMismatch).
	PrepareResume func(*http.Request) error

	// Reconcile, if set, is asked whether a journaled operation happened before
	// idem sends it again when an earlier attempt may have reached the server
	// (its request was written and no final answer came: a cut connection, a
	// timeout, a 5xx, a process that died mid-call), and before Resume or a call
	// gives up on one whose key may have expired on the server (older than
	// KeyTTL). It is never asked before an operation's first attempt, nor after
	// attempts that provably never left (a refused dial). It runs in RoundTrip's
	// retries and in Resume, under the operation's claim (never twice at once for
	// one operation in one process; in a fleet on a PostgreSQL journal, an
	// instance that stalled past its lease may still have an attempt in flight
	// while its adopter reconciles) and after the caller's identity was checked
	// against the operation's. Set it when the server does not honour idempotency
	// keys, or keeps them for less than KeyTTL. See Reconciler; WithReconcile sets
	// one per call, which is not journaled: set Options.Reconcile (or WithReconcile
	// on Resume's context) wherever the operation may be resumed.
	Reconcile Reconciler

	// Identity, if set, maps a journaled request to the identity it is made
	// for: the tenant, customer or account on whose behalf it is sent, never
	// a credential (a refreshed token must stay the same operation; the
	// identity is journaled as given, sealed under Encryption). It is called
	// once per journaled call, before anything is written or sent, and must
	// not read the body; an error fails the call, and "" declares no
	// identity. WithIdentity declares one per call; where both declare one
	// they must be equal, or RoundTrip fails with ErrInvalidRequest: neither
	// overrides the other silently.
	//
	// An operation is bound to the identity it was created under. A call
	// under another identity that names it (the same operation ID or
	// caller's key) fails with ErrIdentityMismatch, and nothing is sent,
	// in this process or after a restart. With no identity declared, the
	// identity is the creator's credentials: the values of the sensitive
	// headers (SensitiveHeaders and DefaultSensitiveHeaders()), the URL's
	// userinfo and the SensitiveQueryParams; a call whose credentials
	// differ (a refreshed token, a changed cookie) is refused. Cookie is a
	// default sensitive header, so a cookie that rotates without being a
	// credential, such as a load balancer's sticky cookie, makes a re-call
	// fail with ErrIdentityMismatch: declare the identity then. Only a keyed
	// hash of them is journaled (Record.CredentialTag). Credentials added
	// below idem (by Base, like an OAuth2 transport, or a TLS client
	// certificate) are not seen: declare the identity then. Operation IDs
	// and caller's keys are one namespace per journal: prefix them with the
	// tenant where tenants choose them.
	//
	// Resume calls Identity again on the request PrepareResume prepared,
	// and does not send it (ErrIdentityMismatch) if it names another
	// identity than the operation's.
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
	methods   map[string]bool
	sensitive map[string]bool
	// sensitiveQuery holds SensitiveQueryParams.
	sensitiveQuery map[string]bool
	observer       Observer // never nil
}

func (o *Options) config() (*config, error) {
	c := &config{}
	if o != nil {
		c.Options = *o
	}
	if err := c.Options.check(); err != nil { // options_check.go
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
		c.Classifier = DefaultClassifier
	}
	c.observer = c.Observer
	if c.observer == nil {
		c.observer = NopObserver{}
	}
	// A record pruned while the server may still replay its key would let a
	// repeated operation ID mint a second key.
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
	// Both would be silently unused: Backoff replaces the schedule they shape.
	if o.Backoff != nil && (o.Multiplier != 0 || o.RandomizationFactor != 0) {
		return fmt.Errorf("%w: Backoff replaces the exponential backoff: Multiplier %v and RandomizationFactor %v must be zero",
			ErrInvalidOptions, o.Multiplier, o.RandomizationFactor)
	}
	// An empty name would match the empty parts of a query ("a=1&&b=2"),
	// which no PrepareResume can put back: the operation could never resume.
	if slices.Contains(o.SensitiveQueryParams, "") {
		return fmt.Errorf("%w: SensitiveQueryParams holds an empty name", ErrInvalidOptions)
	}
	// net/http refuses such a header on every attempt, after the write-ahead:
	// each journaled call would stay pending for good.
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
