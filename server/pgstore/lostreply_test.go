// lostreply_test.go: S38 on PostgreSQL, a Store call whose reply is lost after the database
// acted: through a wrapper that loses replies, and through a real network cut (replies
// dropped on a veth link in a network namespace of the test's own).

package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/idem-go/idem/server/servertest"
)

func TestS38LostReplies(t *testing.T) {
	pool := testPool(t)
	servertest.LostReplies(t, servertest.Config{
		Open: func(t testing.TB) server.Store {
			return openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
		},
		RealLease: 300 * time.Millisecond,
	})
}

func TestS38LostRepliesOverNetwork(t *testing.T) {
	servertest.LostRepliesOverNetwork(t, servertest.NetConfig{Open: openLink})
}

// openLink returns a Store whose pool reaches PostgreSQL through a link of its own that
// the scenario cuts, and a healthy Store on the same schema.
func openLink(t testing.TB) servertest.Link {
	t.Helper()
	direct := testPool(t)
	schema := testSchema(t, direct)
	healthy := openStore(t, direct, pgstore.Options{Schema: schema})
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	link, host, port := pgtest.Link(t, cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, port, nil
	cfg.ConnConfig.DialFunc = link.DialContext
	// A bound for a connect across a cut link (the store calls carry shorter deadlines);
	// generous, for a first connect (Open migrates) on a loaded machine took over 1 s.
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return servertest.Link{
		Store:   openStore(t, pool, pgstore.Options{Schema: schema}),
		Healthy: healthy,
		Replies: link.CutReplies, Both: link.CutBoth, Out: link.CutOutward, Heal: link.Heal,
	}
}
