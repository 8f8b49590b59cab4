// This file holds Claims, the in-process claims a Store hands out: they keep
// two calls (or a call and a resume) from sending one operation at the same
// time in this process.

package journal

import (
	"context"
	"sync"
)

// Claims is a set of claims on operations by name, each held by one holder
// at a time. The zero value is ready to use; it is safe for concurrent use.
// A Store that keeps no claims of its own across processes embeds one.
type Claims struct {
	mu sync.Mutex
	// m maps a held name to the channel its Release closes, made by the
	// first waiter: most claims are never waited for.
	m map[Name]chan struct{}
}

// Claim waits until name is free, then holds it; it returns ctx's error if
// ctx ends first. The holder must Release it.
func (c *Claims) Claim(ctx context.Context, name Name) error {
	for {
		c.mu.Lock()
		held, busy := c.m[name]
		if !busy {
			c.take(name)
			c.mu.Unlock()
			return nil
		}
		if held == nil {
			held = make(chan struct{})
			c.m[name] = held
		}
		c.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TryClaim holds name if it is free, and reports whether it did.
func (c *Claims) TryClaim(name Name) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.m[name]; busy {
		return false
	}
	c.take(name)
	return true
}

func (c *Claims) take(name Name) {
	if c.m == nil {
		c.m = make(map[Name]chan struct{})
	}
	c.m[name] = nil
}

// Release frees name, which the caller holds.
func (c *Claims) Release(name Name) {
	c.mu.Lock()
	held := c.m[name]
	delete(c.m, name)
	c.mu.Unlock()
	if held != nil {
		close(held)
	}
}
