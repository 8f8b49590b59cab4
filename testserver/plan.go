// plan.go draws faults at random from a seeded Plan and parses the fault mix spec that the
// command line uses. fault.go defines the faults themselves.

package testserver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultMix is a fault mix that exercises every FaultKind, about one request in three
// failing. ParsePlan also accepts the spec "default" for it.
const DefaultMix = "lost=0.06,drop=0.04,reset=0.03,503=0.04,503date=0.02,429=0.04,429date=0.02,500=0.03,hold=0.03,slow=0.03"

// dateRetryAfter is how far ahead the "date" status faults put their Retry-After date; with
// the date's one-second resolution the client waits 1-2 s.
const dateRetryAfter = 2 * time.Second

// badRetryAfter is the unparseable Retry-After the "bad" status faults send.
const badRetryAfter = "soon"

// Rate is one line of a Plan: Fault, drawn with probability P.
type Rate struct {
	Fault Fault
	P     float64 // in [0, 1]
}

// Plan draws faults at random. The sequence of draws is a pure function of Seed and Rates,
// so a run can be repeated; which request gets which draw still depends on the order in
// which concurrent requests arrive.
//
// The probabilities should sum to at most 1; the rest is no fault, and rates past a sum of 1
// are never drawn. Set Seed and Rates before the first Draw and do not change them after.
// A Plan is safe for concurrent use and must not be copied after the first Draw.
type Plan struct {
	Seed  uint64
	Rates []Rate

	mu  sync.Mutex
	rng *rand.Rand // created from Seed on the first Draw
}

// Draw returns the next fault, FaultNone for "no fault". A nil Plan never faults.
func (p *Plan) Draw() Fault {
	if p == nil {
		return Fault{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rng == nil {
		// The second PCG word is fixed: one number is all a user should have to write down.
		p.rng = rand.New(rand.NewPCG(p.Seed, 0x6964656d))
	}
	u := p.rng.Float64()
	sum := 0.0
	for _, r := range p.Rates {
		sum += r.P
		if u < sum {
			return r.Fault
		}
	}
	return Fault{}
}

// ParsePlan builds a Plan from seed and a fault mix spec: comma-separated items
// "name=probability" or, for hold and slow, "name=probability:delay" with a
// time.ParseDuration delay such as "hold=0.03:1500ms". The names are:
//
//	lost      FaultLostResponse: payment made, connection reset before the response
//	drop      FaultDropBefore: connection closed before processing
//	reset     FaultResetBody: connection reset while reading the body
//	hold      FaultHold: key held in progress (default DefaultHoldDelay)
//	slow      FaultSlowResponse: response delayed (default DefaultSlowDelay)
//	NNN       FaultStatus with status NNN (400-599); 429 and 503 carry "Retry-After: 1"
//	NNNdate   FaultStatus NNN with Retry-After as an IMF-fixdate 1-2 s ahead
//	NNNbad    FaultStatus NNN with an unparseable Retry-After ("soon")
//
// Probabilities lie in [0, 1] and sum to at most 1; a name may appear once. The spec "" or
// "none" gives a Plan with no rates, "default" is DefaultMix. Errors wrap ErrInvalidPlan.
func ParsePlan(seed uint64, spec string) (*Plan, error) {
	spec = strings.TrimSpace(spec)
	switch spec {
	case "", "none":
		return &Plan{Seed: seed}, nil
	case "default":
		spec = DefaultMix
	}
	p := &Plan{Seed: seed}
	seen := make(map[string]bool)
	sum := 0.0
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		r, name, err := parseRate(item)
		if err != nil {
			return nil, fmt.Errorf("%w: item %q: %v", ErrInvalidPlan, item, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: item %q: %s given twice", ErrInvalidPlan, item, name)
		}
		seen[name] = true
		sum += r.P
		p.Rates = append(p.Rates, r)
	}
	if sum > 1+1e-9 {
		return nil, fmt.Errorf("%w: probabilities sum to %g, more than 1", ErrInvalidPlan, sum)
	}
	return p, nil
}

// parseRate parses one "name=probability[:delay]" item and returns it with its name.
func parseRate(item string) (Rate, string, error) {
	name, value, ok := strings.Cut(item, "=")
	if !ok {
		return Rate{}, "", fmt.Errorf(`want name=probability, e.g. "lost=0.05"`)
	}
	name = strings.TrimSpace(name)
	prob, delayText, hasDelay := strings.Cut(strings.TrimSpace(value), ":")
	p, err := strconv.ParseFloat(prob, 64)
	if err != nil || math.IsNaN(p) || p < 0 || p > 1 {
		return Rate{}, "", fmt.Errorf("probability %q is not a number in [0, 1]", prob)
	}
	f, err := faultNamed(name)
	if err != nil {
		return Rate{}, "", err
	}
	if hasDelay {
		if f.Kind != FaultHold && f.Kind != FaultSlowResponse {
			return Rate{}, "", fmt.Errorf("a delay applies only to hold and slow")
		}
		d, err := time.ParseDuration(delayText)
		if err != nil || d <= 0 {
			return Rate{}, "", fmt.Errorf("delay %q is not a positive duration such as 1500ms", delayText)
		}
		f.Delay = d
	}
	return Rate{Fault: f, P: p}, name, nil
}

// faultNamed returns the fault template for a spec name.
func faultNamed(name string) (Fault, error) {
	switch name {
	case "lost":
		return Fault{Kind: FaultLostResponse}, nil
	case "drop":
		return Fault{Kind: FaultDropBefore}, nil
	case "reset":
		return Fault{Kind: FaultResetBody}, nil
	case "hold":
		return Fault{Kind: FaultHold}, nil
	case "slow":
		return Fault{Kind: FaultSlowResponse}, nil
	}
	if len(name) < 3 {
		return Fault{}, fmt.Errorf("unknown fault %q", name)
	}
	code, err := strconv.Atoi(name[:3])
	if err != nil || code < 400 || code > 599 {
		return Fault{}, fmt.Errorf("unknown fault %q: want lost, drop, reset, hold, slow or a status 400-599", name)
	}
	f := Fault{Kind: FaultStatus, Status: code}
	switch name[3:] {
	case "":
		if code == 429 || code == 503 {
			f.RetryAfter = "1"
		}
	case "date":
		f.RetryAfterDate = dateRetryAfter
	case "bad":
		f.RetryAfter = badRetryAfter
	default:
		return Fault{}, fmt.Errorf("unknown fault %q: a status takes no suffix, \"date\" or \"bad\"", name)
	}
	return f, nil
}
