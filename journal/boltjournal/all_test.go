// Tests for all.go beyond the conformance suite: a settled record still owed
// to the file is listed settled, once, before and after it is written.

package boltjournal

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// listAll returns what All yields, as "key state" lines.
func listAll(t *testing.T, j *Journal) []string {
	t.Helper()
	var got []string
	for rec, err := range j.All(context.Background()) {
		require.NoError(t, err)
		require.Empty(t, rec.Body, "All lists without bodies")
		got = append(got, rec.Key+" "+rec.State.String())
	}
	return got
}

// An unnamed operation's settled record waits in memory for its batch
// (history.go): All lists it settled meanwhile, as it does once written, and
// the operation pending before it stays listed first.
func TestAllListsOwedSettledRecords(t *testing.T) {
	j, _ := testJournal(t)
	holdHistory(j)
	require.NoError(t, j.insert(pendingRecord("waiting"), false))
	owedAfterCommit(t, j, "minted")
	want := []string{"waiting pending", "next pending", "minted settled"}
	require.Equal(t, want, listAll(t, j))

	require.NoError(t, j.flush()) // writes what is owed
	_, done := inBuckets(t, j, 2)
	require.True(t, done, "the settled record is in the file now")
	require.Equal(t, want, listAll(t, j))
}
