// lostreply_test.go: S38 on Redis, a Store call whose reply is lost after Redis acted: through a
// wrapper that loses replies, and through a real network cut (replies dropped on a veth
// link in a network namespace of the test's own).

package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/internal/netfault"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/servertest"
)

func TestS38LostReplies(t *testing.T) {
	c := newClient(t)
	servertest.LostReplies(t, servertest.Config{
		Open:      func(t testing.TB) server.Store { return newStore(t, c) },
		RealLease: 300 * time.Millisecond,
	})
}

func TestS38LostRepliesOverNetwork(t *testing.T) {
	servertest.LostRepliesOverNetwork(t, servertest.NetConfig{Open: openLink})
}

// openLink returns a Store whose client reaches Redis through a link of its own that the
// scenario cuts, and a healthy Store on the same records.
func openLink(t testing.TB) servertest.Link {
	t.Helper()
	direct := newClient(t)
	prefix := newPrefix(t, direct)
	link := netfault.New(t, redisAddr())
	cut := redis.NewClient(&redis.Options{
		Addr: link.Addr(), Dialer: link.DialContext, ContextTimeoutEnabled: true,
		MaxRetries: -1, // the middleware repeats calls itself, with their tokens
	})
	t.Cleanup(func() { cut.Close() })
	return servertest.Link{
		Store:   storeOn(t, cut, prefix),
		Healthy: storeOn(t, direct, prefix),
		Replies: link.CutReplies, Both: link.CutBoth, Out: link.CutOutward, Heal: link.Heal,
	}
}
