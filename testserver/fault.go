// fault.go names the faults the server can inject: FaultKind and Fault. plan.go draws them at
// random; inject.go carries them out on the connection.

package testserver

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Default fault delays, used when Fault.Delay is zero.
const (
	// DefaultHoldDelay is how long FaultHold keeps a key in progress.
	DefaultHoldDelay = 1500 * time.Millisecond
	// DefaultSlowDelay is how long FaultSlowResponse waits before it answers.
	DefaultSlowDelay = 2 * time.Second
)

// FaultKind says how a request fails. Its text form (String, ParseFaultKind, MarshalText)
// is the name used in Ledger.Faults.
type FaultKind int

const (
	// FaultNone lets the request through untouched.
	FaultNone FaultKind = iota
	// FaultStatus answers Fault.Status before processing, with Fault.RetryAfter verbatim
	// (or a date, see Fault.RetryAfterDate). Nothing is stored; the key stays free.
	FaultStatus
	// FaultDropBefore closes the connection before processing, without a response.
	// Nothing is stored; the key stays free.
	FaultDropBefore
	// FaultLostResponse processes the request fully (the payment is created and the result
	// stored), then resets the connection without a response: the client cannot know that
	// the payment exists.
	FaultLostResponse
	// FaultSlowResponse processes the request fully, then waits Fault.Delay (default
	// DefaultSlowDelay) before it answers, so a client with a shorter timeout gives up. The
	// wait ends early when the server closes or the client goes away.
	FaultSlowResponse
	// FaultHold keeps the key registered in progress for Fault.Delay (default
	// DefaultHoldDelay) before processing, so a concurrent or retried request with the same
	// key meets 409. The request then completes normally. Server.ReleaseHolds ends the hold
	// early; Server.Close aborts it without processing.
	FaultHold
	// FaultResetBody reads part of the request body, then resets the connection (TCP RST).
	// Nothing is processed or stored; the key stays free.
	FaultResetBody
)

var faultKindNames = [...]string{
	FaultNone:         "none",
	FaultStatus:       "status",
	FaultDropBefore:   "drop",
	FaultLostResponse: "lost",
	FaultSlowResponse: "slow",
	FaultHold:         "hold",
	FaultResetBody:    "reset",
}

// String returns the kind's name: none, status, drop, lost, slow, hold or reset.
func (k FaultKind) String() string {
	if k >= 0 && int(k) < len(faultKindNames) {
		return faultKindNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// ParseFaultKind returns the kind named s, as String spells it.
func ParseFaultKind(s string) (FaultKind, error) {
	for k, name := range faultKindNames {
		if name == s {
			return FaultKind(k), nil
		}
	}
	return FaultNone, fmt.Errorf("testserver: unknown fault kind %q", s)
}

// MarshalText implements encoding.TextMarshaler with the kind's name.
func (k FaultKind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(faultKindNames) {
		return nil, fmt.Errorf("testserver: unknown fault kind %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseFaultKind.
func (k *FaultKind) UnmarshalText(text []byte) error {
	kind, err := ParseFaultKind(string(text))
	if err != nil {
		return err
	}
	*k = kind
	return nil
}

// Fault is one injected failure, a plain value. The zero Fault is no fault. Only the fields
// that the Kind names are used.
type Fault struct {
	// Kind says what happens; the other fields only refine it.
	Kind FaultKind

	// Status is the HTTP status FaultStatus answers; zero means 503.
	Status int
	// RetryAfter is the Retry-After header FaultStatus sends, verbatim: delta-seconds, an
	// HTTP-date in any form, or garbage, to test a client's parser. Empty means none,
	// unless RetryAfterDate is set.
	RetryAfter string
	// RetryAfterDate, when positive and RetryAfter is empty, makes FaultStatus send
	// Retry-After as an IMF-fixdate (RFC 9110 section 5.6.7, UTC) this long after the
	// server's clock at the moment the fault fires. The date has one-second resolution, so
	// the instant it names is up to one second earlier.
	RetryAfterDate time.Duration

	// Delay is how long FaultHold holds or FaultSlowResponse waits; zero means
	// DefaultHoldDelay or DefaultSlowDelay.
	Delay time.Duration
}

// String describes the fault for logs, e.g. "status 429 Retry-After=1" or "hold 1.5s".
func (f Fault) String() string {
	switch f.Kind {
	case FaultStatus:
		s := fmt.Sprintf("status %d", f.status())
		switch {
		case f.RetryAfter != "":
			s += fmt.Sprintf(" Retry-After=%q", f.RetryAfter)
		case f.RetryAfterDate > 0:
			s += fmt.Sprintf(" Retry-After=date+%v", f.RetryAfterDate)
		}
		return s
	case FaultHold, FaultSlowResponse:
		return fmt.Sprintf("%v %v", f.Kind, f.delay())
	}
	return f.Kind.String()
}

// ledgerName is the name Ledger.Faults counts the fault under: the kind, or
// for FaultStatus the status and the form of its Retry-After, e.g.
// "429 Retry-After=date".
func (f Fault) ledgerName() string {
	if f.Kind != FaultStatus {
		return f.Kind.String()
	}
	name := strconv.Itoa(f.status())
	switch {
	case f.RetryAfter == "" && f.RetryAfterDate > 0:
		name += " Retry-After=date"
	case f.RetryAfter == "":
	case strings.Trim(f.RetryAfter, "0123456789") == "":
		name += " Retry-After=seconds"
	default:
		name += " Retry-After=other"
	}
	return name
}

// status returns the status FaultStatus answers.
func (f Fault) status() int {
	if f.Status == 0 {
		return http.StatusServiceUnavailable
	}
	return f.Status
}

// retryAfter returns the Retry-After value FaultStatus sends at now, or "" for none.
func (f Fault) retryAfter(now time.Time) string {
	if f.RetryAfter != "" || f.RetryAfterDate <= 0 {
		return f.RetryAfter
	}
	return now.Add(f.RetryAfterDate).UTC().Format(http.TimeFormat)
}

// delay returns how long FaultHold or FaultSlowResponse waits.
func (f Fault) delay() time.Duration {
	switch {
	case f.Delay > 0:
		return f.Delay
	case f.Kind == FaultHold:
		return DefaultHoldDelay
	default:
		return DefaultSlowDelay
	}
}
