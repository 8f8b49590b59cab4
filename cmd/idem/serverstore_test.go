package main

import (
	"context"
	"crypto/rand"
	"net/url"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/require"
)

// checkInProgress claims keys through the servers' own store clients and checks that
// inProgress counts exactly the records still in progress: a claim counts until it is
// completed or released.
func checkInProgress(t *testing.T, ss *serverStore, before int) {
	t.Helper()
	ctx := context.Background()
	count := func() int {
		n, err := ss.inProgress(ctx)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, before, count())
	scope := func(key string) server.Scope {
		return server.Scope{Identity: "test", Method: "POST", Path: "/payments", Key: key + rand.Text()}
	}
	var claims []server.Scope
	var tokens []string
	for i, key := range []string{"a", "b", "c"} {
		sc := scope(key)
		cl, err := ss.stores[i%len(ss.stores)].Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour)
		require.NoError(t, err)
		require.True(t, cl.Claimed)
		claims, tokens = append(claims, sc), append(tokens, cl.Token)
	}
	require.Equal(t, before+3, count())
	require.NoError(t, ss.stores[0].Complete(ctx, claims[0], tokens[0], &server.Response{Status: 201}, time.Hour))
	require.NoError(t, ss.stores[1].Release(ctx, claims[1], tokens[1]))
	require.Equal(t, before+1, count(), "completed and released records are not in progress")
}

// TestServerStoreRedis: each server gets a client of its own through a link of its own,
// and inProgress reads the run's prefix only.
func TestServerStoreRedis(t *testing.T) {
	addr := testRedis(t)
	ss, err := openServerStore("redis://"+addr+"/0", 2, nil)
	require.NoError(t, err)
	defer ss.Close()
	require.Len(t, ss.stores, 2)
	require.Len(t, ss.links, 2)
	checkInProgress(t, ss, 0)
	for _, l := range ss.links {
		require.Positive(t, l.Stats().Conns, "the store is reached through its link")
	}
}

// TestServerStorePostgres: the same on PostgreSQL; records in progress from before the
// run, in the same schema, are not counted.
func TestServerStorePostgres(t *testing.T) {
	journalURL, _ := testPostgres(t)
	u, err := url.Parse(journalURL)
	require.NoError(t, err)
	q := u.Query()
	q.Del("namespace")
	u.RawQuery = q.Encode()

	earlier, err := openServerStore(u.String(), 1, nil)
	require.NoError(t, err)
	_, err = earlier.stores[0].Claim(context.Background(), server.Scope{Key: "an earlier run's"}, server.NewToken(), "fp", time.Minute, time.Hour)
	require.NoError(t, err)
	earlier.Close()

	ss, err := openServerStore(u.String(), 2, nil)
	require.NoError(t, err)
	defer ss.Close()
	require.Len(t, ss.links, 2)
	checkInProgress(t, ss, 0)
	for _, l := range ss.links {
		require.Positive(t, l.Stats().Conns, "the store is reached through its link")
	}
}
