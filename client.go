// This file holds Client, the high-level face of idem that Open returns: a
// drop-in *http.Client, Resume on startup or in the background, and Close.
// The work is done by Transport (transport.go).

package idem

import (
	"context"
	"net/http"
	"sync"

	"github.com/idem-go/idem/journal/boltjournal"
)

// Client bundles a Journal and the Transport that writes to it. It is safe for
// concurrent use. Close it when done: it owns the journal file. Get one from
// Open: the zero Client, which owns no journal, is not usable (the zero
// Transport is, without a journal).
//
// A typical program opens one Client at startup, starts a background resumer
// (or calls Resume), and uses HTTPClient wherever it used http.DefaultClient:
//
//	c, err := idem.Open("payments.journal", nil)
//	if err != nil { ... }
//	defer c.Close()
//	c.StartResumer(ctx, handleOutcome) // func(idem.Outcome); Close stops it
//	http.DefaultClient = c.HTTPClient()
type Client struct {
	journal   *boltjournal.Journal
	transport *Transport
	http      *http.Client

	mu     sync.Mutex // guards closed, and resumers starting against it
	closed bool
}

// HTTPClient returns an *http.Client whose every request goes through the
// Transport: a drop-in replacement for http.DefaultClient. Its Timeout is zero;
// bound calls with the request context instead, so a timed-out operation stays
// pending rather than unknown.
func (c *Client) HTTPClient() *http.Client { return c.http }

// Transport returns the Client's RoundTripper, to wrap or to use in another
// *http.Client.
func (c *Client) Transport() *Transport { return c.transport }

// Resume re-sends pending operations; see Transport.Resume. It returns when
// each due operation settled or ran out of attempts, which with its server
// down is the whole backoff schedule: bound ctx at startup
// (context.WithTimeout; what is left stays pending), or use StartResumer,
// which does not block.
func (c *Client) Resume(ctx context.Context, fn func(Outcome)) error {
	return c.transport.Resume(ctx, fn)
}

// Close stops the background resumers, then closes the journal. The resumers
// start nothing new; the operations they are sending get up to
// Options.CloseTimeout to finish, then their attempts are canceled and they
// stay pending. Calls still in flight through HTTPClient are not waited for:
// their operations stay pending in the file, even when the response arrives
// after Close, and the next Open's Resume replays them with the same key.
// Later calls do nothing and return the first one's error.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	rs := c.transport.resumers.all()
	c.mu.Unlock()
	for _, r := range rs {
		r.beginStop()
	}
	deadline, release := closeAfter(c.transport.cfg.CloseTimeout) // one deadline for all
	for _, r := range rs {
		r.finish(deadline)
	}
	release()
	if n := c.transport.pending.n.Swap(0); n != 0 {
		c.transport.cfg.observer.PendingChanged(-int(n))
	}
	return c.journal.Close()
}
