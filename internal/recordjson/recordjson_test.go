package recordjson_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/recordjson"
	"github.com/idem-go/idem/internal/recordjson/recordjsontest"
	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

// Append writes what encoding/json writes, byte for byte; the zone offsets
// just short of a day are written, as encoding/json writes them.
func TestAppendMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		r := recordjsontest.Record(rng)
		if i < 2 {
			r.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", []int{1, -1}[i]*(24*3600-1)))
		}
		want, err := json.Marshal(journal.JSONOf(r))
		require.NoError(t, err)
		got, err := recordjson.Append(nil, r, recordjson.Whole)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "record %d", i)

		// The column is the whole form less five members, the others as they
		// were, in their order; appended to what the buffer held.
		got, err = recordjson.Append([]byte("kept"), r, recordjson.Column)
		require.NoError(t, err)
		require.Equal(t, "kept"+lessMembers(t, want, "key", "op", "caller_key", "state", "updated"), string(got),
			"record %d as a column", i)
	}
}

// lessMembers returns the JSON object obj without the members named, the
// others' bytes as they are, in their order.
func lessMembers(t *testing.T, obj []byte, names ...string) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	_, err := dec.Token() // {
	require.NoError(t, err)
	var out []string
	for dec.More() {
		name, err := dec.Token()
		require.NoError(t, err)
		var v json.RawMessage
		require.NoError(t, dec.Decode(&v))
		if !slices.Contains(names, name.(string)) {
			out = append(out, strconv.Quote(name.(string))+":"+string(v))
		}
	}
	return "{" + strings.Join(out, ",") + "}"
}

// A time encoding/json refuses is refused too, not written unreadable.
func TestAppendRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*3600)),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("a day east", 24*3600)),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("a day west", -24*3600)),
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
