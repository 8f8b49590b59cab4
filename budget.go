// This file holds the retry budget: a token bucket per host that keeps
// retries to a fraction of first attempts once a server keeps failing, after
// gRPC retry throttling (gRFC A6) and the AWS SDKs' retry quota.

package idem

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults used where a RetryBudget field is zero.
const (
	// DefaultRetryRatio lets retries add at most 10% to the request rate
	// once the bucket is empty.
	DefaultRetryRatio = 0.1
	// DefaultRetryBurst is the bucket's capacity: the retries a host may get
	// in a burst before the ratio limits them.
	DefaultRetryBurst = 100
)

// RetryBudget limits retries per host (the URL's host and port, the scheme's
// default port if none), so that when a server fails every request, clients
// do not answer its outage with MaxAttempts times the load. Its zero value
// gives DefaultRetryRatio (0.1) and DefaultRetryBurst (100); as Ratio 0 is
// the default, "no retries once the bucket is empty" is a tiny Ratio (1e-6).
//
// Each host has a bucket holding up to Burst tokens, full at first:
//
//   - every first attempt of a call adds Ratio tokens;
//   - every retry takes one token, and is made only if a whole one is there;
//   - every final response (the server answered: the call settles) adds one
//     token, and gives back the token of the retry that got it.
//
// So while a server answers, retries pay for themselves; when it fails
// everything, the bucket empties after about Burst retries, and then retries
// add at most Ratio to the request rate. First attempts are never
// throttled. Any retry counts (a retryable status, 409, Retry-After, a
// network error), and so does re-sending a pending operation already
// attempted, by Resume or by a call with its operation ID or key. A
// journaled operation denied a retry stays pending: the call returns a
// *PendingError matching ErrRetryBudgetExhausted. Resume sends and writes
// nothing for an operation it holds back: it reports the first of each host
// so, and leaves that host's other attempted operations for its next pass,
// unreported. An unjournaled request denied a retry returns its last
// response, or its last error joined with ErrRetryBudgetExhausted.
//
// A host whose bucket is empty and which got no first attempt for a second
// may still get one retry in that second (a probe), so pending work moves
// when nothing else calls it. Buckets live in memory, one per host a
// Transport has called; a fresh process starts with full buckets.
type RetryBudget struct {
	// Ratio is the tokens a first attempt earns: once the bucket is empty,
	// the retries allowed per first attempt. 0 means DefaultRetryRatio; it
	// must lie in [0, 1000] (ErrInvalidOptions otherwise).
	Ratio float64

	// Burst is the bucket's capacity and initial content, in retries. 0 means
	// DefaultRetryBurst; it must lie in [0, 2^30] (ErrInvalidOptions
	// otherwise).
	Burst int

	// Disabled turns the budget off: each call retries up to its MaxAttempts.
	Disabled bool
}

// maxBudgetHosts bounds the buckets kept; see makeRoom.
const maxBudgetHosts = 1024

// probeEvery is how often a host whose bucket is empty, and which gets no
// first attempts, may still get a retry (see RetryBudget).
const probeEvery = time.Second

// token is one retry, in the fixed-point units the buckets count in, so that
// ten first attempts at Ratio 0.1 make exactly one retry.
const token = 1_000_000

// budget is the per-host token buckets of one Transport. It is safe for
// concurrent use.
type budget struct {
	ratio, burst int64 // in token units
	disabled     bool

	mu sync.Mutex
	// hosts holds buckets by value: a resumed operation's retry takes a
	// token from a full bucket and its answer fills it again (dropped), so
	// a pointer per bucket would be an allocation per operation.
	hosts map[string]bucket // a host not here has a full bucket
	// stored is len(hosts), written under mu: while it is 0, every bucket
	// is full and adding to one changes nothing, so add needs no lock.
	stored atomic.Int64
}

type bucket struct {
	tokens int64     // in token units
	quiet  time.Time // the last first attempt or probe: a probe may follow probeEvery after
}

func newBudget(b RetryBudget) *budget {
	return &budget{ratio: int64(math.Round(b.Ratio * token)), burst: int64(b.Burst) * token,
		disabled: b.Disabled, hosts: make(map[string]bucket)}
}

// full reports whether every bucket is full (or the budget is off): a first
// attempt or an answer then changes nothing, and needs neither its host's
// name nor the time.
func (b *budget) full() bool { return b.disabled || b.stored.Load() == 0 }

// first records a first attempt to u's host at now, which earns Ratio, and
// returns the host's bucket name (budgetHost).
func (b *budget) first(u *url.URL, now time.Time) string {
	host := budgetHost(u)
	b.add(host, b.ratio, now)
	return host
}

// answered records a final response to a call; retried says whether it
// answered a retry, whose token comes back.
func (b *budget) answered(host string, retried bool) {
	n := int64(token)
	if retried {
		n += token
	}
	b.add(host, n, time.Time{})
}

// retry reports whether a retry to host may be made at now, and if so takes
// its token (or its probe).
func (b *budget) retry(host string, now time.Time) bool {
	return b.take(host, now).ok
}

// grant is what take gave: a token, a probe, or nothing.
type grant struct {
	ok, probe bool
	quiet     time.Time // a probe's bucket's quiet time before it
}

// take is retry, saying what it gave so that undo can give it back.
func (b *budget) take(host string, now time.Time) grant {
	if b.disabled {
		return grant{ok: true}
	}
	host = strings.ToLower(host)
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, ok := b.hosts[host]
	if !ok {
		b.makeRoom()
		bk = bucket{tokens: b.burst, quiet: now}
	}
	var g grant
	switch {
	case bk.tokens >= token:
		bk.tokens -= token
		g = grant{ok: true}
	case now.Sub(bk.quiet) >= probeEvery:
		g = grant{ok: true, probe: true, quiet: bk.quiet}
		bk.quiet = now
	}
	b.hosts[host] = bk
	b.stored.Store(int64(len(b.hosts)))
	return g
}

// undo gives back what take granted for a retry that was not sent after all:
// a token, or the probe (which earns nothing).
func (b *budget) undo(host string, g grant) {
	switch {
	case !g.ok || b.disabled:
	case g.probe:
		b.mu.Lock()
		defer b.mu.Unlock()
		host = strings.ToLower(host)
		if bk, ok := b.hosts[host]; ok && g.quiet.Before(bk.quiet) {
			bk.quiet = g.quiet
			b.hosts[host] = bk
		}
	default:
		b.add(host, token, time.Time{})
	}
}

// add puts n token units in host's bucket and, if now is set, notes a first
// attempt at now.
func (b *budget) add(host string, n int64, now time.Time) {
	if b.full() {
		return // no bucket to add to
	}
	host = strings.ToLower(host)
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, ok := b.hosts[host]
	if !ok {
		return // full already
	}
	if !now.IsZero() {
		bk.quiet = now
	}
	if bk.tokens += n; bk.tokens >= b.burst {
		delete(b.hosts, host) // full, like a host never seen
		b.stored.Store(int64(len(b.hosts)))
		return
	}
	b.hosts[host] = bk
}

// available is the retries host's bucket holds, for tests and figures.
func (b *budget) available(host string) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bk, ok := b.hosts[strings.ToLower(host)]; ok {
		return float64(bk.tokens) / token
	}
	return float64(b.burst) / token
}

// makeRoom keeps at most maxBudgetHosts buckets; mu is held. Only buckets
// short of tokens are stored: it forgets the fullest, which is full again.
func (b *budget) makeRoom() {
	if len(b.hosts) < maxBudgetHosts {
		return
	}
	var fullest string
	for h, bk := range b.hosts {
		if fullest == "" || bk.tokens > b.hosts[fullest].tokens {
			fullest = h
		}
	}
	delete(b.hosts, fullest)
}

// budgetHost names u's bucket: its host and port, lower case, the scheme's
// default port made explicit, so "https://a" and "https://A:443" share one.
func budgetHost(u *url.URL) string {
	port := u.Port()
	if port != "" && !strings.Contains(u.Host, "[") {
		return strings.ToLower(u.Host) // host:port already, and no allocation
	}
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// resendDenied reports a re-send of a pending operation that host's budget
// did not allow, and returns its *PendingError: nothing is sent or written,
// and the operation is due again a probe's interval from now.
func (t *Transport) resendDenied(ctx context.Context, rec *Record, host string, resumed bool) *PendingError {
	t.cfg.observer.RetryDenied(ctx, RetryEvent{Method: rec.Method, Journaled: true, Resumed: resumed,
		Status: rec.Status, Class: ClassRetry, Wait: probeEvery})
	return &PendingError{Key: rec.Key, OperationID: rec.OperationID, Attempts: rec.Attempts,
		LastStatus: rec.Status, Err: budgetError(host, nil), NextAttempt: t.clock.Now().Add(probeEvery)}
}

// check refuses a RetryBudget no bucket can follow. The bounds keep the
// token arithmetic far from overflow.
func (b RetryBudget) check() error {
	// Written so that NaN fails too: every comparison with NaN is false.
	if !(b.Ratio >= 0 && b.Ratio <= maxRetryRatio) {
		return fmt.Errorf("%w: RetryBudget.Ratio %v is outside [0, %d]", ErrInvalidOptions, b.Ratio, maxRetryRatio)
	}
	if b.Burst < 0 || b.Burst > maxRetryBurst {
		return fmt.Errorf("%w: RetryBudget.Burst %d is outside [0, %d]", ErrInvalidOptions, b.Burst, maxRetryBurst)
	}
	return nil
}

const (
	maxRetryRatio = 1000
	maxRetryBurst = 1 << 30
)
