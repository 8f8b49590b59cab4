// Tests for what a view lists: filters, the limit, the counts beside them,
// and a Store that can list only its pending operations.

package journalhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/journalhttp"
	"github.com/idem-go/idem/journal/memjournal"
	"github.com/stretchr/testify/require"
)

// memWith returns a memjournal holding operations "op-0".."op-<n-1>", the
// odd ones settled, op-2 expired and op-4 failed.
func memWith(t *testing.T, n int) *memjournal.Store {
	t.Helper()
	s := memjournal.New(nil)
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	at := time.Now().Add(-time.Hour)
	for i := range n {
		body := []byte(fmt.Sprintf(`{"ref":%d,"card":"SECRET-BODY-4111"}`, i))
		rec := &journal.Record{Key: fmt.Sprintf("key-%d", i), OperationID: fmt.Sprintf("op-%d", i), Method: http.MethodPost,
			URL: "https://api.example.test/payments?ref=SECRET-QUERY-PLAIN", Header: http.Header{"X-Api-Key": {"SECRET-HEADER-VALUE"}},
			Identity: "SECRET-TENANT", Body: body, BodySHA256: journal.BodySum(body)}
		_, err := journal.Apply(rec, journal.EventCreate, journal.Change{Now: at.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
		require.NoError(t, s.Create(ctx, rec))
		var e journal.Event
		switch {
		case i%2 == 1:
			e = journal.EventSettle
		case i == 2:
			e = journal.EventExpire
		case i == 4:
			e = journal.EventFail
		default:
			continue
		}
		_, err = journal.Apply(rec, e, journal.Change{Now: at, Status: 201})
		require.NoError(t, err)
		require.NoError(t, s.Update(ctx, rec, journal.Durable))
	}
	return s
}

// view GETs the JSON view of h at query.
func view(t *testing.T, h http.Handler, query string) *journalhttp.View {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, mount+"?format=json&"+query, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	noSecrets(t, query, rec.Body.Bytes())
	return decode(t, rec.Body.Bytes())
}

func opIDs(v *journalhttp.View) []string {
	var ids []string
	for _, e := range v.Operations {
		ids = append(ids, e.OperationID)
	}
	return ids
}

// Filters and the limit choose what is listed; the counts and the oldest
// pending operation always cover the whole journal.
func TestViewFiltersAndLimit(t *testing.T) {
	h := journalhttp.Handler(memWith(t, 8), &journalhttp.Options{Limit: 5})
	for _, tc := range []struct {
		query     string
		want      []string
		matched   int
		truncated bool
	}{
		{"", []string{"op-0", "op-6", "op-1", "op-2", "op-3"}, 8, true}, // Options.Limit
		{"state=pending", []string{"op-0", "op-6"}, 2, false},
		{"state=Expired,failed", []string{"op-2", "op-4"}, 2, false},
		{"op=op-3", []string{"op-3"}, 1, false},
		{"op=op-*&limit=2", []string{"op-0", "op-6"}, 8, true},
		{"limit=50", []string{"op-0", "op-6", "op-1", "op-2", "op-3"}, 8, true}, // never above Options.Limit
		{"op=nope", nil, 0, false},
	} {
		v := view(t, h, tc.query)
		require.Equal(t, tc.want, opIDs(v), tc.query)
		require.Equal(t, tc.matched, v.Matched, tc.query)
		require.Equal(t, tc.truncated, v.Truncated, tc.query)
		require.Equal(t, map[string]int{"pending": 2, "settled": 4, "expired": 1, "failed": 1}, v.Counts, tc.query)
		require.Equal(t, "op-0", v.OldestPending.OperationID, tc.query)
		require.False(t, v.Partial)
	}
}

// pendingOnly is a Store that is not a journal.Lister.
type pendingOnly struct{ journal.Store }

// A Store that cannot list its finished operations shows its pending ones,
// counted, and says the view is partial.
func TestViewOfAStoreThatListsPendingOnly(t *testing.T) {
	h := journalhttp.Handler(pendingOnly{memWith(t, 8)}, nil)
	v := view(t, h, "")
	require.True(t, v.Partial)
	require.Equal(t, []string{"op-0", "op-6"}, opIDs(v))
	require.Equal(t, 2, v.Counts["pending"])

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, mount, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "records        2 pending (this journal lists its pending operations only)\n")
	require.True(t, strings.HasSuffix(strings.Split(rec.Body.String(), "\n\n")[1], "2 record(s)"), rec.Body.String())
}

// An Entry's Record is the record as far as the view shows it: what `idem
// journal` prints of a view.
func TestEntryRecord(t *testing.T) {
	v := view(t, journalhttp.Handler(memWith(t, 3), nil), "op=op-2")
	e := v.Operations[0]
	r := e.Record()
	require.Equal(t, e.ID, journal.RefOf(r).Seq)
	require.Equal(t, journal.StateExpired, r.State)
	require.Equal(t, "op-2", r.OperationID)
	require.Equal(t, "https://api.example.test/payments?…", r.URL)
	require.True(t, r.AttemptsUncertain())
	require.Empty(t, r.Body)
	require.Empty(t, r.Header)
	require.Empty(t, r.Identity)
}
