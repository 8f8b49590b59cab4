// Tests for the write-ahead (transport.go, journal.go): a record exists only
// once its insert returned nil, and every attempt finds its record committed.
// Field scenario S22 (SCENARIOS.md, "Journal").

package idem

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

func TestS22_RecordExistsOnlyAfterInsertReturned(t *testing.T) {
	t.Parallel()
	rec := func(key, op string) *Record {
		return &Record{Key: key, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/payments",
			State: StatePending, Created: time.Now(), Updated: time.Now()}
	}

	t.Run("a failed insert leaves nothing behind", func(t *testing.T) {
		j, _ := testJournal(t)
		a := rec("key-a", "op-1")
		require.NoError(t, insertRec(j, a, true))
		require.NotZero(t, seqOf(a))

		failed := []*Record{
			rec("key-b", "op-1"), // operation ID taken
			rec("key-a", "op-2"), // key taken
			rec(strings.Repeat("k", bboltMaxKeySize+1), "op-3"), // bbolt refuses the index key
		}
		for _, f := range failed {
			err := insertRec(j, f, true)
			require.Error(t, err)
			require.Zero(t, seqOf(f), "no trace of a rolled-back insert on the caller's record")
		}
		require.ErrorIs(t, insertRec(j, rec("key-b", "op-1"), true), journal.ErrNameTaken)
		for _, probe := range []journal.Name{{Key: "key-b"}, {OperationID: "op-2"}, {OperationID: "op-3"}} {
			got, err := j.Get(context.Background(), probe)
			require.NoError(t, err)
			require.Nil(t, got, "index entry %q", probe)
		}
		recs, err := j.Records()
		require.NoError(t, err)
		require.Len(t, recs, 1)

		// The failed inserts used neither the index nor a sequence number.
		e := rec("key-b", "op-2")
		require.NoError(t, insertRec(j, e, true))
		require.Equal(t, seqOf(a)+1, seqOf(e))
		got, err := j.Lookup("op-2")
		require.NoError(t, err)
		require.Equal(t, "key-b", got.Key)
	})

	t.Run("concurrent inserts", func(t *testing.T) {
		j, _ := testJournal(t)
		const goroutines, each = 32, 8
		var wg sync.WaitGroup
		ids := make([][]uint64, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					r := rec(fmt.Sprintf("key-%d-%d", g, i), fmt.Sprintf("op-%d-%d", g, i))
					if err := insertRec(j, r, true); err != nil {
						t.Error(err)
						return
					}
					ids[g] = append(ids[g], seqOf(r))
				}
			})
		}
		wg.Wait()
		seen := make(map[uint64]bool)
		for g := range goroutines {
			require.Len(t, ids[g], each)
			for i, id := range ids[g] {
				require.False(t, seen[id], "ID %d given twice", id)
				seen[id] = true
				got, err := j.Lookup(fmt.Sprintf("op-%d-%d", g, i))
				require.NoError(t, err)
				require.Equal(t, id, seqOf(got))
				require.Equal(t, fmt.Sprintf("key-%d-%d", g, i), got.Key)
			}
		}
		recs, err := j.Records()
		require.NoError(t, err)
		require.Len(t, recs, goroutines*each)
	})

	t.Run("every attempt finds its record committed", func(t *testing.T) {
		srv, wire := startPayments(t, nil), newWireLog(t)
		j, _ := testJournal(t)
		var checked atomic.Int32
		wire.intercept = func(r *http.Request, key string) (*http.Response, error) {
			got, err := recordByKey(j, key)
			switch {
			case err != nil:
				t.Errorf("attempt with key %s: %v", key, err)
			case got == nil || got.State != StatePending:
				t.Errorf("attempt with key %s sent before its pending record was committed: %+v", key, got)
			default:
				checked.Add(1)
			}
			return nil, nil
		}
		tr, _ := transportOn(t, j, Options{}, wire, time.Time{})
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				req, _ := paymentRequest(t, context.Background(), srv.URL, fmt.Sprintf("order-s22-%d", i), 100+i)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		require.EqualValues(t, 20, checked.Load())
		require.Equal(t, 20, srv.Ledger().Payments())
	})
}

// bboltMaxKeySize is bbolt's MaxKeySize, the longest key it stores: a part of its
// file format, so it is not expected to change.
const bboltMaxKeySize = 32768

// recordByKey scans the journal for the record with key: keys idem mints are
// not indexed.
func recordByKey(j *boltjournal.Journal, key string) (*Record, error) {
	recs, err := j.Records()
	for _, r := range recs {
		if r.Key == key {
			return r, err
		}
	}
	return nil, err
}
