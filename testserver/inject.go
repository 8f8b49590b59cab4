// inject.go carries faults out: it cuts connections the way a bad network does and waits
// for hold and slow-response delays. fault.go says what each fault means; create.go decides
// when each one acts.

package testserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// resetReadLimit bounds how much of the body FaultResetBody reads before the reset.
const resetReadLimit = 32 << 10

// abortConn ends the connection under w without a response. With rst the peer gets a TCP
// RST (SO_LINGER 0) instead of a FIN, as when a middlebox or a crashed host drops it. When w
// cannot be hijacked (HTTP/2, a recorder), it aborts the handler instead, which net/http
// turns into a closed connection or a reset stream.
func abortConn(w http.ResponseWriter, rst bool) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// readPart reads about half of r's body (at least one byte, at most resetReadLimit), so that
// the reset happens while the client is still sending.
func readPart(r *http.Request) {
	n := r.ContentLength / 2
	if n < 1 {
		n = 1
	}
	n = min(n, resetReadLimit)
	_, _ = io.CopyN(io.Discard, r.Body, n)
}

// waitHold waits d for FaultHold. It returns false if the server closed meanwhile, in which
// case the request must not be processed. ReleaseHolds ends the wait early with true. The
// client going away does not end a hold: a real server does not notice either.
func (s *Server) waitHold(d time.Duration) bool {
	// Take the release channel before counting the hold, so a ReleaseHolds that sees the
	// count also wakes this wait.
	release := s.released()
	s.holding.Add(1)
	defer s.holding.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-release:
		return true
	case <-s.done:
		return false
	}
}

// waitSlow waits d for FaultSlowResponse. It returns false if the client went away, so there
// is no one to answer. Close and ReleaseHolds end the wait early with true.
func (s *Server) waitSlow(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.released():
	case <-s.done:
	case <-ctx.Done():
		return false
	}
	return true
}

// released returns the channel that the next ReleaseHolds closes.
func (s *Server) released() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release
}
