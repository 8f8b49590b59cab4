// Tests for read.go: listing pending first, pruning what is finished, a
// damaged record read as ErrCorrupt rather than a panic, and the two reads of
// a pending record Resume makes (a listing, then a re-read).

package boltjournal

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

func TestJournalPrune(t *testing.T) {
	j, _ := testJournal(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	j.now = func() time.Time { return now }
	j.commit.lastPrune = now // no periodic prune: this test prunes by hand
	const retention = 7 * 24 * time.Hour
	old, fresh := now.Add(-retention-time.Minute), now.Add(-retention+time.Minute)

	add := func(op string, state State, updated time.Time) *Record {
		rec := &Record{Key: "key-" + op, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/p",
			State: state, Created: updated.Add(-time.Hour), Updated: updated}
		require.NoError(t, j.insert(rec, true))
		return rec
	}
	doomed := []*Record{add("settled-old", StateSettled, old), add("failed-old", StateFailed, old), add("expired-old", StateExpired, old)}
	kept := []*Record{
		add("pending-ancient", StatePending, now.Add(-100*retention)),
		add("settled-fresh", StateSettled, fresh), add("failed-fresh", StateFailed, fresh),
		add("expired-fresh", StateExpired, fresh), add("pending-fresh", StatePending, fresh),
	}

	n, err := j.Prune(retention)
	require.NoError(t, err)
	require.Equal(t, len(doomed), n)
	for _, rec := range doomed {
		got, err := j.Lookup(rec.OperationID)
		require.NoError(t, err)
		require.Nil(t, got, rec.OperationID)
		got, err = j.Get(context.Background(), journal.Name{Key: rec.Key})
		require.NoError(t, err)
		require.Nil(t, got, "key index of %s", rec.OperationID)
	}
	for _, rec := range kept {
		got, err := j.Lookup(rec.OperationID)
		require.NoError(t, err)
		require.NotNil(t, got, rec.OperationID)
		require.Equal(t, rec.State, got.State)
	}
	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, len(kept))

	// A pruned operation ID and key are free again.
	add("settled-old", StatePending, now)

	// Pending records survive any retention, however small.
	n, err = j.Prune(time.Nanosecond)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	recs, err = j.Records()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for _, rec := range recs {
		require.Equal(t, StatePending, rec.State)
	}
}

func TestJournalRecordsPendingFirst(t *testing.T) {
	j, _ := testJournal(t)
	states := []State{StateSettled, StatePending, StateFailed, StateExpired, StatePending, StateSettled, StatePending}
	for i, st := range states {
		rec := &Record{Key: "key-" + string(rune('a'+i)), Method: http.MethodPost, URL: "http://127.0.0.1/p",
			State: st, Created: time.Now(), Updated: time.Now()}
		require.NoError(t, j.insert(rec, true))
	}
	recs, err := j.Records()
	require.NoError(t, err)
	var got []string
	for _, rec := range recs {
		got = append(got, rec.State.String()+":"+rec.Key)
	}
	require.Equal(t, []string{
		"pending:key-b", "pending:key-e", "pending:key-g",
		"settled:key-a", "failed:key-c", "expired:key-d", "settled:key-f",
	}, got)
}

// A record whose stored form does not parse is ErrCorrupt naming the path
// for every reader; the root's TestJournalBadRecordFailsResume checks
// Resume over such a file.
func TestJournalBadRecordIsCorruptNotPanic(t *testing.T) {
	j, path := testJournal(t)
	rec := &Record{Key: "k-1", OperationID: "op-1", Method: http.MethodPost, URL: "http://127.0.0.1/p",
		State: StatePending, Created: time.Now(), Updated: time.Now()}
	require.NoError(t, j.insert(rec, true))
	require.NoError(t, j.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPending).Put(idKey(seqOf(rec)), []byte("{not json")); err != nil {
			return err
		}
		return tx.Bucket(bucketDone).Put(idKey(seqOf(rec)+1), []byte(`{"state":"settled?"}`))
	}))

	_, err := j.Records()
	require.ErrorIs(t, err, journal.ErrCorrupt)
	require.Contains(t, err.Error(), path)
	_, err = j.Lookup("op-1")
	require.ErrorIs(t, err, journal.ErrCorrupt)
	_, err = j.Prune(time.Hour)
	require.ErrorIs(t, err, journal.ErrCorrupt)
	var pendingErr error
	for _, err := range j.Pending(context.Background(), 0) {
		if err != nil {
			pendingErr = err
			break
		}
	}
	require.ErrorIs(t, pendingErr, journal.ErrCorrupt, "Pending, as Resume lists")
}

// insertWithBody writes a pending record with key and body, the key the
// caller's.
func insertWithBody(t *testing.T, j *Journal, key, body string) *Record {
	t.Helper()
	rec := pendingRecord(key)
	rec.Body = []byte(body)
	require.NoError(t, j.insert(rec, true))
	return rec
}

// Resume reads each pending record twice: listed a page at a time
// (readPending), then again under the operation's lock just before sending
// (reget, Store.Reload). The listing holds the newest state without a
// commit.
func TestPendingAfterSeesDeferredChanges(t *testing.T) {
	ctx := context.Background()
	j, _ := testJournal(t)
	a := insertWithBody(t, j, "a", "body-a")
	b := insertWithBody(t, j, "b", "body-b")
	insertWithBody(t, j, "c", "body-c")

	release := j.holdCommits()
	a.State, a.Status = StateSettled, http.StatusCreated
	require.NoError(t, j.Update(ctx, a, journal.Deferred))
	b.Attempts, b.NextAttempt = 2, time.Now().Add(time.Hour).Round(0)
	require.NoError(t, j.Update(ctx, b, journal.Deferred))

	page, err := j.pendingAfter(0, 10)
	require.NoError(t, err)
	require.Len(t, page, 2, "a settle not yet committed is not pending")
	require.Equal(t, []string{"b", "c"}, []string{page[0].Key, page[1].Key})
	require.Equal(t, 2, page[0].Attempts, "a deferred change stands in for the file")
	require.True(t, b.NextAttempt.Equal(page[0].NextAttempt))
	require.Nil(t, page[0].Body, "a listing holds no bodies")
	require.Equal(t, StatePending, onDisk(t, j, seqOf(a)).State, "nothing was committed")

	release()
	require.NoError(t, j.flush())
	got, err := j.Reload(ctx, page[0])
	require.NoError(t, err)
	require.Equal(t, "body-b", string(got.Body))
	require.Equal(t, 2, got.Attempts)
	require.Nil(t, journal.RefOf(got).Meta)
}

// The re-read of a listed record (reget) returns what get would.
func TestRegetMatchesGet(t *testing.T) {
	ctx := context.Background()
	for name, opts := range map[string]*Options{
		"plaintext": nil,
		"sealed":    {Encryption: &Keyring{Current: "A", Keys: map[string][]byte{"A": newKey32(t)}}},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := Open(t.TempDir()+"/idem.journal", opts)
			require.NoError(t, err)
			defer j.Close()
			small := insertWithBody(t, j, "small", `{"amount":700}`)
			large := insertWithBody(t, j, "large", string(bytes.Repeat([]byte("x"), 3*bodyChunk+5)))

			page, err := j.pendingAfter(0, 10)
			require.NoError(t, err)
			require.Len(t, page, 2)
			for i, want := range []*Record{small, large} {
				got, err := j.Reload(ctx, page[i])
				require.NoError(t, err)
				fresh, err := j.get(seqOf(want))
				require.NoError(t, err)
				require.Equal(t, fresh, got, "reget reads what get reads")
				require.Equal(t, want.Body, got.Body)
			}

			// Changed on disk since the listing: decoded again.
			small.Attempts, small.LastError = 3, "503"
			require.NoError(t, j.Update(ctx, small, journal.Deferred))
			require.NoError(t, j.flush())
			got, err := j.Reload(ctx, page[0])
			require.NoError(t, err)
			require.Equal(t, 3, got.Attempts)
			require.Equal(t, "503", got.LastError)

			// Settled since: reget says so, as get does.
			large.State = StateSettled
			require.NoError(t, j.Update(ctx, large, journal.Deferred))
			require.NoError(t, j.flush())
			got, err = j.Reload(ctx, page[1])
			require.NoError(t, err)
			require.Equal(t, StateSettled, got.State)
		})
	}
}

// A body altered in the file is refused, whether reget sends the listing's
// copy (altered before the listing) or reads the body again (altered after
// it, once a change to the record made reget look at the file).
func TestRegetRefusesAlteredBody(t *testing.T) {
	ctx := context.Background()
	for _, when := range []string{"before the listing", "after the listing"} {
		t.Run(when, func(t *testing.T) {
			j, _ := testJournal(t)
			rec := insertWithBody(t, j, "a", `{"amount":700}`)
			alter := func() {
				require.NoError(t, j.db.Update(func(tx *bolt.Tx) error {
					return setStoredBodyTx(tx, idKey(seqOf(rec)), []byte(`{"amount":900}`))
				}))
			}
			if when == "before the listing" {
				alter()
			}
			page, err := j.pendingAfter(0, 10)
			require.NoError(t, err)
			if when == "after the listing" {
				require.NoError(t, j.Update(ctx, rec, journal.Durable)) // the same metadata, written again
				alter()
			}
			_, err = j.Reload(ctx, page[0])
			require.ErrorIs(t, err, journal.ErrCorrupt, "the metadata is unchanged, the body is not")
		})
	}
}

// A listed record that nothing changed since is reloaded from the
// listing's copy, without a read transaction; one that changed is read
// again, whichever write changed it.
func TestRegetReadsOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	for _, change := range []string{"none", "deferred", "durable", "by hand", "another record"} {
		t.Run(change, func(t *testing.T) {
			j, _ := testJournal(t)
			rec := insertWithBody(t, j, "a", `{"amount":700}`)
			other := insertWithBody(t, j, "b", `{"amount":800}`)
			page, err := j.pendingAfter(0, 10)
			require.NoError(t, err)
			want := StatePending
			switch change {
			case "deferred":
				rec.Attempts = 4
				require.NoError(t, j.Update(ctx, rec, journal.Deferred))
			case "durable":
				rec.Attempts = 4
				require.NoError(t, j.Update(ctx, rec, journal.Durable))
			case "by hand":
				_, err := j.Resolve(journal.Name{Key: "a"}, http.StatusCreated)
				require.NoError(t, err)
				want = StateSettled
			case "another record":
				other.Attempts = 4
				require.NoError(t, j.Update(ctx, other, journal.Durable))
			}
			reads := j.db.Stats().TxN
			got, err := j.Reload(ctx, page[0])
			require.NoError(t, err)
			require.Equal(t, want, got.State)
			switch change {
			case "none", "another record":
				require.Equal(t, reads, j.db.Stats().TxN, "unchanged: nothing read")
				require.Equal(t, 0, got.Attempts)
				require.Equal(t, `{"amount":700}`, string(got.Body))
				require.Equal(t, journal.Ref{Seq: seqOf(rec)}, journal.RefOf(got))
			case "deferred", "durable":
				require.Equal(t, 4, got.Attempts, "the change is seen")
				require.Equal(t, `{"amount":700}`, string(got.Body))
			}
		})
	}
}

// A record listed through a Journal since closed is read from the file by
// the Journal opened after it, which did not see what changed it since.
func TestRegetAfterReopenReadsTheFile(t *testing.T) {
	ctx := context.Background()
	j, _ := testJournal(t)
	insertWithBody(t, j, "a", `{"amount":700}`)
	page, err := j.pendingAfter(0, 10)
	require.NoError(t, err)
	_, err = j.Resolve(journal.Name{Key: "a"}, http.StatusCreated)
	require.NoError(t, err)
	j = reopen(t, j)
	got, err := j.Reload(ctx, page[0])
	require.NoError(t, err)
	require.Equal(t, StateSettled, got.State)
}

// A change under way, or ended after a listing took its generation, makes
// reget read the file; one ended before does not.
func TestChangeMarks(t *testing.T) {
	var m, later changeMarks
	m.open()
	require.False(t, m.unchanged(7, m.opened), "read before the Journal opened")
	m.begin(7)
	m.end(7)
	g := m.now()
	require.True(t, m.unchanged(7, g), "ended before the read")
	m.begin(7)
	require.False(t, m.unchanged(7, g), "under way")
	require.True(t, m.unchanged(8, g), "another slot")
	m.end(7)
	require.False(t, m.unchanged(7, g), "ended after the read")
	require.False(t, m.unchanged(7+markSlots, g), "a record sharing the slot")
	require.True(t, m.unchanged(7, m.now()))
	g = m.now()
	later.open()
	require.False(t, later.unchanged(7, g), "read through another Journal")
}

// A listing decodes a record only when it yields it: a caller that stops
// early never meets a damaged record further on, and one that reads on gets
// every record before it, then the error.
func TestPendingDecodesWhatItYields(t *testing.T) {
	ctx := context.Background()
	j, _ := testJournal(t)
	a := insertWithBody(t, j, "a", "body-a")
	b := insertWithBody(t, j, "b", "body-b")
	bad := insertWithBody(t, j, "c", "body-c")
	require.NoError(t, j.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPending).Put(idKey(seqOf(bad)), []byte{binaryTag, 0x7f})
	}))

	var took []uint64
	for rec, err := range j.Pending(ctx, 0) {
		require.NoError(t, err)
		if took = append(took, seqOf(rec)); len(took) == 2 {
			break
		}
	}
	require.Equal(t, []uint64{seqOf(a), seqOf(b)}, took)

	took = nil
	var last error
	for rec, err := range j.Pending(ctx, 0) {
		if err != nil {
			last = err
			continue
		}
		took = append(took, seqOf(rec))
	}
	require.Equal(t, []uint64{seqOf(a), seqOf(b)}, took)
	require.ErrorIs(t, last, journal.ErrCorrupt)
}

// A page of a listing holds what it read: one record with a large header
// costs about its own size, not a page's worth of it.
func TestPendingPageSizedToWhatItRead(t *testing.T) {
	ctx := context.Background()
	j, _ := testJournal(t)
	rec := pendingRecord("large")
	rec.Header = http.Header{"X-Large": {strings.Repeat("x", 64<<10)}}
	require.NoError(t, j.insert(rec, true))

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := 0
	for rec, err := range j.Pending(ctx, 0) {
		require.NoError(t, err)
		require.Len(t, rec.Header.Get("X-Large"), 64<<10)
		n++
	}
	runtime.ReadMemStats(&after)
	require.Equal(t, 1, n)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2<<20), "a 64 KiB record listed alone")
}

// Listed and reloaded records share no maps with each other or with the
// journal's deferred state (journal.Store: records are copies).
func TestListedRecordsAreCopies(t *testing.T) {
	ctx := context.Background()
	j, _ := testJournal(t)
	for _, key := range []string{"deferred", "file"} {
		rec := pendingRecord(key)
		rec.Header = http.Header{"X-Test": {"1"}}
		rec.Body = []byte("body-" + key)
		require.NoError(t, j.insert(rec, true))
		if key == "deferred" {
			rec.Attempts = 1
			require.NoError(t, j.Update(ctx, rec, journal.Deferred)) // stays pending, deferred
		}
	}
	release := j.holdCommits()
	defer release()
	var listed []*Record
	for rec, err := range j.Pending(ctx, 0) {
		require.NoError(t, err)
		listed = append(listed, rec)
	}
	require.Len(t, listed, 2)
	for _, l := range listed {
		got, err := j.Reload(ctx, l)
		require.NoError(t, err)
		got.Header.Set("X-Test", "changed by the reloader")
		require.Equal(t, "1", l.Header.Get("X-Test"), "record %s: Reload's copy shares the listed header", l.Key)
		l.Header.Set("X-Test", "changed by the lister")
		fresh, err := j.get(seqOf(l))
		require.NoError(t, err)
		require.Equal(t, "1", fresh.Header.Get("X-Test"), "record %s: the listing shares the journal's header", l.Key)
	}
}

// Reload sees every Update that returned before it began, while updates
// race with the listing and with it: the change marks never let a
// listing's copy stand for a record changed since it was read.
func TestRegetSeesUpdatesThatReturned(t *testing.T) {
	ctx := context.Background()
	for d, updates := range map[journal.Durability]int{journal.Deferred: 20000, journal.Durable: 200} {
		j, _ := testJournal(t)
		rec := insertWithBody(t, j, "a", `{"amount":700}`)
		var returned atomic.Int64 // the highest Attempts an Update returned with
		done := make(chan struct{})
		go func() {
			defer close(done)
			for n := 1; n <= updates; n++ {
				rec.Attempts = n
				if err := j.Update(ctx, rec, d); err != nil {
					t.Error(err)
					return
				}
				returned.Store(int64(n))
				runtime.Gosched()
			}
		}()
		for finished := false; !finished; {
			select {
			case <-done:
				finished = true
			default:
			}
			require.NoError(t, j.flush()) // so that the listing reads the file, often
			page, err := j.pendingAfter(0, 1)
			require.NoError(t, err)
			require.Len(t, page, 1)
			want := returned.Load()
			got, err := j.Reload(ctx, page[0])
			require.NoError(t, err)
			require.GreaterOrEqual(t, int64(got.Attempts), want, "durability %d: an Update that returned before Reload began", d)
		}
	}
}
