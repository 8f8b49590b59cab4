// repeat.go repeats, in the background, calls to the Store whose outcome is unknown (a
// timeout, a cut connection): every Store call is safe to repeat with the same token, so
// each is sent again, with backoff, until the Store answers or the call is of no use.

package lease

import (
	"context"
	"sync"
	"time"
)

// Result is how a repeated call ended.
type Result int

const (
	Landed  Result = iota + 1 // it returned nil
	Refused                   // the Store refused it (the record is another holder's, or done)
	GaveUp                    // no answer before its deadline, or the Repeater was shut down
)

// Repeater repeats calls in the background. It is safe for concurrent use.
type Repeater struct {
	max     int64
	timeout time.Duration
	maxWait time.Duration
	refused func(err error) bool

	mu      sync.Mutex
	running int64
	idle    chan struct{} // closed when running drops to 0
	stop    chan struct{} // closed when Shutdown gives the repeats up
	once    sync.Once
}

// NewRepeater returns a Repeater that repeats at most limit calls at once, each attempt
// bounded by timeout, waiting from 10 ms between attempts, doubling up to maxWait;
// refused reports the Store's refusal.
func NewRepeater(limit int64, timeout, maxWait time.Duration, refused func(error) bool) *Repeater {
	return &Repeater{max: limit, timeout: timeout, maxWait: max(maxWait, 10*time.Millisecond),
		refused: refused, stop: make(chan struct{})}
}

// Start repeats f, with ctx's values but not its cancellation, until it lands, is
// refused, or until passes; then it calls end with the result and the last error. It
// returns false, and repeats nothing, when max calls are being repeated already or the
// Repeater was shut down.
func (p *Repeater) Start(ctx context.Context, until time.Time, f func(context.Context) error, end func(Result, error)) bool {
	p.mu.Lock()
	select {
	case <-p.stop:
		p.mu.Unlock()
		return false
	default:
	}
	if p.running >= p.max {
		p.mu.Unlock()
		return false
	}
	if p.running == 0 {
		p.idle = make(chan struct{})
	}
	p.running++
	p.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer p.done()
		wait := 10 * time.Millisecond
		var err error
		for {
			t := time.NewTimer(wait)
			select {
			case <-p.stop:
				t.Stop()
				end(GaveUp, err)
				return
			case <-t.C:
			}
			cctx, cancel := context.WithTimeout(ctx, p.timeout)
			err = f(cctx)
			cancel()
			switch {
			case err == nil:
				end(Landed, nil)
				return
			case p.refused(err):
				end(Refused, err)
				return
			case !time.Now().Before(until):
				end(GaveUp, err)
				return
			}
			wait = min(2*wait, p.maxWait)
		}
	}()
	return true
}

func (p *Repeater) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running--; p.running == 0 {
		close(p.idle)
	}
}

// Shutdown waits for the calls being repeated to end, until ctx ends; then it gives up
// those left (each ends GaveUp) and returns ctx's error. Later Starts repeat nothing.
func (p *Repeater) Shutdown(ctx context.Context) error {
	err := p.wait(ctx)
	p.mu.Lock()
	p.once.Do(func() { close(p.stop) })
	p.mu.Unlock()
	_ = p.wait(context.Background()) // each given-up loop ends at once
	return err
}

// wait waits until no call is repeated, or ctx ends.
func (p *Repeater) wait(ctx context.Context) error {
	p.mu.Lock()
	if p.running == 0 {
		p.mu.Unlock()
		return nil
	}
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
