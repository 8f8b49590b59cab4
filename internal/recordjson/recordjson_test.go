package recordjson_test

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/recordjson"
	"github.com/idem-go/idem/internal/recordjson/recordjsontest"
	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

// Append writes what encoding/json writes, byte for byte.
func TestAppendMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		r := recordjsontest.Record(rng)
		want, err := json.Marshal(journal.JSONOf(r))
		require.NoError(t, err)
		got, err := recordjson.Append(nil, r, recordjson.Whole)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "record %d", i)

		// The column is the whole form less five members (pgjournal's test
		// compares its bytes with encoding/json's of the struct it reads).
		var whole, column map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(want, &whole))
		for _, name := range []string{"key", "op", "caller_key", "state", "updated"} {
			delete(whole, name)
		}
		got, err = recordjson.Append([]byte("kept"), r, recordjson.Column)
		require.NoError(t, err)
		require.Equal(t, "kept", string(got[:4]), "record %d as a column", i)
		require.NoError(t, json.Unmarshal(got[4:], &column), "record %d as a column", i)
		require.Equal(t, whole, column, "record %d as a column", i)
	}
}

// A time encoding/json refuses is refused too, not written unreadable.
func TestAppendRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*3600)),
	} {
		for _, r := range []*journal.Record{{Key: "k", Created: at}, {Key: "k", NextAttempt: at}} {
			_, jerr := json.Marshal(journal.JSONOf(r))
			require.Error(t, jerr, "%v", at)
			for _, f := range []recordjson.Form{recordjson.Whole, recordjson.Column} {
				_, err := recordjson.Append(nil, r, f)
				require.ErrorIs(t, err, recordjson.ErrTime, "%v", at)
			}
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	now := time.Now()
	r := &journal.Record{Key: "0b8f7a4e-1f6c-4b8e-9a57-4d1c2e3f4a5b", Method: http.MethodPost,
		URL:        "https://api.example.com/v1/payments",
		Header:     http.Header{"Content-Type": {"application/json"}, "User-Agent": {"idem"}},
		BodySHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Created:    now, Updated: now, State: journal.StatePending}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(journal.JSONOf(r)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := recordjson.Append(make([]byte, 0, 512), r, recordjson.Whole); err != nil {
				b.Fatal(err)
			}
		}
	})
}
