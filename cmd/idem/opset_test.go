package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The set counts each ID once, whether kept as a bit or, for an ID of another
// shape, in its map.
func TestOpSet(t *testing.T) {
	var s opSet
	require.False(t, s.has(opID(0)))
	for _, op := range []string{opID(0), opID(3), opID(200), opID(3), "order-03/charge", "refund-1", "order-x/charge", opID(maxOpBit), "refund-1", "0001/charge"} {
		s.add(op)
	}
	require.Equal(t, 8, s.len())
	for _, op := range []string{opID(0), opID(3), opID(200), "order-03/charge", "refund-1", "order-x/charge", opID(maxOpBit)} {
		require.True(t, s.has(op), op)
	}
	for _, op := range []string{opID(1), opID(64), opID(201), opID(10_000), "order-3/charge", "order--1/charge"} {
		require.False(t, s.has(op), op)
	}
	require.Len(t, s.bits, 4, "200 fits in four words")
}
