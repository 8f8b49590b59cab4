// Tests for Store.Records: every record, pending first, each group in Seq
// order, with bodies, as copies.

package memjournal

import (
	"context"
	"net/http"
	"testing"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

func TestRecordsPendingFirst(t *testing.T) {
	ctx := context.Background()
	s := New(nil)
	defer s.Close()
	states := []journal.State{journal.StateSettled, journal.StatePending, journal.StateFailed,
		journal.StateExpired, journal.StatePending, journal.StateSettled, journal.StatePending}
	for i, st := range states {
		body := []byte{'a' + byte(i)}
		rec := &journal.Record{Key: "key-" + string(rune('a'+i)), Method: http.MethodPost, URL: "http://127.0.0.1/p",
			Body: body, BodySHA256: journal.BodySum(body), State: journal.StatePending, CallerKey: true}
		require.NoError(t, s.Create(ctx, rec))
		if st != journal.StatePending {
			rec.State = st
			require.NoError(t, s.Update(ctx, rec, journal.Durable))
		}
	}
	recs, err := s.Records()
	require.NoError(t, err)
	var got []string
	for _, rec := range recs {
		got = append(got, rec.State.String()+":"+rec.Key)
	}
	require.Equal(t, []string{
		"pending:key-b", "pending:key-e", "pending:key-g",
		"settled:key-a", "failed:key-c", "expired:key-d", "settled:key-f",
	}, got)
	require.Equal(t, []byte("b"), recs[0].Body, "bodies included")
	recs[0].Body[0] = 'x'
	again, err := s.Records()
	require.NoError(t, err)
	require.Equal(t, []byte("b"), again[0].Body, "copies")

	require.NoError(t, s.Close())
	_, err = s.Records()
	require.ErrorIs(t, err, journal.ErrClosed)
}
