// sweep_test.go checks that a long-running Store stays bounded: expired records and
// remembered tokens are dropped from its maps, not only hidden from lookups.

package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/stretchr/testify/require"
)

// Two simulated hours of keys, 100 every 20 seconds with a one-minute TTL, half completed and half
// released: the maps never hold more than a TTL's keys, a ReleasedTokenTTL's tokens, and
// what a sweep may leave between two sweeps.
func TestSweepKeepsMapsBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New(&Options{Now: func() time.Time { return now }})
	ctx, ttl, perStep := context.Background(), time.Minute, 100
	resp := &server.Response{Status: 201, Body: []byte(`{"id":"pay_1"}`)}
	maxRecords, maxReleased := 0, 0
	for i := range 2 * 60 * 60 / 20 * perStep { // four ReleasedTokenTTLs
		if i%perStep == 0 {
			now = now.Add(20 * time.Second)
		}
		sc := server.Scope{Method: "POST", Path: "/payments", Key: fmt.Sprint("k-", i)}
		c, err := s.Claim(ctx, sc, server.NewToken(), "fp", 10*time.Second, ttl)
		require.NoError(t, err)
		require.True(t, c.Claimed)
		if i%2 == 0 {
			require.NoError(t, s.Complete(ctx, sc, c.Token, resp, ttl))
		} else {
			require.NoError(t, s.Release(ctx, sc, c.Token))
		}
		maxRecords, maxReleased = max(maxRecords, len(s.records)), max(maxReleased, len(s.released))
	}
	// 100 keys every 20 s: a TTL holds 300 keys, ReleasedTokenTTL 9,000 tokens (half of them
	// released); a sweep comes every sweepEvery claims.
	keysIn := func(d time.Duration) int { return int(d/(20*time.Second)) * perStep }
	require.LessOrEqual(t, maxRecords, keysIn(ttl)+perStep+sweepEvery, "records")
	require.LessOrEqual(t, maxReleased, keysIn(server.ReleasedTokenTTL)/2+perStep+sweepEvery, "released tokens")
	require.Greater(t, maxReleased, keysIn(server.ReleasedTokenTTL)/2-perStep, "tokens are kept ReleasedTokenTTL")
}
