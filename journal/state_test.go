package journal

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every event from every state does what the table says, and nothing else:
// a refused transition leaves the record as it was.
func TestApplyFollowsTheTable(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	states := []State{0, StatePending, StateSettled, StateExpired, StateFailed}
	events := []Event{EventCreate, EventRetry, EventSettle, EventFail, EventRepend, EventExpire, EventResolve, EventDiscard}
	allowed := 0
	for _, from := range states {
		for _, e := range events {
			rec := &Record{Key: "k", State: from, Body: []byte("b"), LastError: "old", Created: t0}
			before := *rec
			prev, err := Apply(rec, e, Change{Now: t0.Add(time.Minute), Status: 201, Next: t0.Add(time.Hour), Error: "why", Body: []byte("new")})
			require.Equal(t, from, prev)
			to, ok := transitions[e][from]
			if !ok {
				var te *TransitionError
				require.True(t, errors.As(err, &te), "%s from %s: %v", e, from, err)
				require.Equal(t, before, *rec, "%s from %s: refused, unchanged", e, from)
				continue
			}
			allowed++
			require.NoError(t, err, "%s from %s", e, from)
			require.Equal(t, to, rec.State, "%s from %s", e, from)
		}
	}
	require.Equal(t, 11, allowed, "the table's transitions")
}

func TestApplyWritesWhatGoesWithEachEvent(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0.Add(time.Minute)
	pending := func() *Record {
		return &Record{State: StatePending, Body: []byte("b"), LastError: "old", Status: 503, Created: t0, Updated: t0,
			NextAttempt: t0.Add(time.Second)}
	}

	rec := &Record{}
	_, err := Apply(rec, EventCreate, Change{Now: now})
	require.NoError(t, err)
	require.Equal(t, Record{State: StatePending, Created: now, Updated: now}, *rec)

	rec = pending()
	_, err = Apply(rec, EventSettle, Change{Now: now, Status: 201})
	require.NoError(t, err)
	require.Equal(t, Record{State: StateSettled, Status: 201, Created: t0, Updated: now}, *rec, "settled: body, next attempt and error cleared")

	rec = pending()
	_, err = Apply(rec, EventRetry, Change{Now: now, Status: 429, Next: now.Add(time.Hour), Error: "e"})
	require.NoError(t, err)
	require.Equal(t, t0, rec.Updated, "a retry is no change of state")
	require.Equal(t, []any{429, now.Add(time.Hour), "e", []byte("b")}, []any{rec.Status, rec.NextAttempt, rec.LastError, rec.Body})

	rec = pending()
	_, err = Apply(rec, EventFail, Change{Now: now, Error: "bad URL"})
	require.NoError(t, err)
	require.Equal(t, []any{StateFailed, "bad URL", now}, []any{rec.State, rec.LastError, rec.Updated})

	_, err = Apply(rec, EventRepend, Change{Body: []byte("again")})
	require.NoError(t, err)
	require.Equal(t, []any{StatePending, "again", now}, []any{rec.State, string(rec.Body), rec.Updated})

	rec = pending()
	_, err = Apply(rec, EventDiscard, Change{Now: now, Error: "refunded"})
	require.NoError(t, err)
	require.Equal(t, []any{StateExpired, DiscardedError + ": refunded", time.Time{}}, []any{rec.State, rec.LastError, rec.NextAttempt})

	_, err = Apply(rec, EventResolve, Change{Now: now, Status: 200})
	require.NoError(t, err, "an expired operation can still be resolved by hand")
	require.Equal(t, StateSettled, rec.State)
}

func TestExpiredDueReusable(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ttl, maxWait := time.Hour, time.Minute
	rec := &Record{State: StatePending, Created: t0, Updated: t0, LastAttempt: t0, NextAttempt: t0.Add(10 * time.Second)}

	require.False(t, Expired(rec, t0.Add(ttl), ttl), "exactly KeyTTL old is not past it")
	require.True(t, Expired(rec, t0.Add(ttl+1), ttl))
	require.False(t, Expired(rec, t0.Add(-2*ttl), ttl), "dated in the future: aged from its last write")

	require.Equal(t, t0.Add(10*time.Second), Due(rec, t0, ttl, maxWait))
	require.Equal(t, t0.Add(2*ttl), Due(rec, t0.Add(2*ttl), ttl, maxWait), "past KeyTTL: due at once")
	back := t0.Add(-time.Hour)
	require.Equal(t, back.Add(10*time.Second), Due(rec, back, ttl, maxWait), "clock set back: the chosen wait, from now")

	for _, c := range []struct {
		state State
		at    time.Time
		want  Reuse
	}{
		{StatePending, t0, ReuseNotDue},
		{StatePending, t0.Add(time.Minute), ReuseSend},
		{StatePending, t0.Add(2 * ttl), ReuseExpired},
		{StateExpired, t0, ReuseExpired},
		{StateSettled, t0, ReuseSend},
		{StateSettled, t0.Add(2 * ttl), ReuseSettled},
		{StateFailed, t0, ReuseSend},
	} {
		r := *rec
		r.State = c.state
		got, _ := Reusable(&r, c.at, ttl, maxWait)
		require.Equal(t, c.want, got, "%s at %s", c.state, c.at.Sub(t0))
	}
}
