// Tests that the journal's file stays bounded under churn: bbolt reuses the
// pages that settled bodies free, and never gives them back to the file
// system (docs/real-world.md, "The journal file").

package boltjournal

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run of write-ahead and settle cycles, each with large and staged bodies
// written by concurrent calls and settled in one commit (all but the newest,
// which stays pending into the next cycle, as calls in flight do), keeps the
// file within twice the bytes in flight at once and two growth steps: bbolt
// reuses the pages settled bodies free. (Before settles dropped every chunk,
// it grew by the bodies left behind, without bound, past the limit by the
// fourth to seventh cycle; the file is steady from the second.)
func TestJournalSizeBoundedUnderChurn(t *testing.T) {
	t.Parallel()
	j := fastJournal(t)
	sizes := []int{stageMin + 5000, 3*bodyChunk + 100, bodyChunk + 1, 2*stageStep + 300}
	inFlight := int64(2*stageStep + 300) // held over from the cycle before
	for _, size := range sizes {
		inFlight += int64(size)
	}
	limit := 2*inFlight + 2*growStep
	const cycles = 20
	var seen []int64
	var held *Record
	n := 0
	for cycle := range cycles {
		recs := make([]*Record, len(sizes))
		var wg sync.WaitGroup
		errs := make([]error, len(sizes))
		for i, size := range sizes {
			recs[i] = &Record{Key: fmt.Sprint("k", n+i), OperationID: fmt.Sprint("op", n+i), Method: http.MethodPost,
				URL: "http://127.0.0.1/payments", Body: randomBody(t, size), State: StatePending}
			wg.Go(func() { errs[i] = j.insert(recs[i], true) })
		}
		wg.Wait()
		n += len(sizes)
		for i := range recs {
			require.NoError(t, errs[i], "cycle %d", cycle)
		}
		settle := slices.Clone(recs[:len(recs)-1])
		if held != nil {
			settle = append(settle, held)
		}
		held = recs[len(recs)-1]
		for _, rec := range settle {
			rec.State, rec.Status = StateSettled, http.StatusCreated
			require.NoError(t, j.save(rec))
		}
		require.NoError(t, j.flush())
		fi, err := os.Stat(j.Path())
		require.NoError(t, err)
		seen = append(seen, fi.Size())
		require.LessOrEqual(t, fi.Size(), limit, "cycle %d: sizes so far %v", cycle, seen)
	}
	t.Logf("file size by cycle: %v", seen)
}
