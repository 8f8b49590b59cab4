package boltjournal

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/recordjson/recordjsontest"
	"github.com/stretchr/testify/require"
)

// appendJSON writes exactly what encoding/json writes for Record's tags, so
// records it writes read back the same, and journals written before it are
// the same bytes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		r := recordjsontest.Record(rng)
		want, err := json.Marshal(storedRecord{Record: r})
		require.NoError(t, err)
		got, err := appendJSON(r, nil, nil)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "record %d", i)

		box := []byte(recordjsontest.Bytes(rng))
		want, err = json.Marshal(storedRecord{Record: r, Box: box})
		require.NoError(t, err)
		got, err = appendJSON(r, nil, box)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "sealed record %d", i)
	}
}

// A time encoding/json refuses is refused too, not written unreadable.
func TestAppendJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*3600)),
	} {
		r := &Record{Key: "k", Created: at}
		_, jerr := json.Marshal(storedRecord{Record: r})
		require.Error(t, jerr, "%v", at)
		_, err := appendJSON(r, nil, nil)
		require.Error(t, err, "%v", at)
	}
}

func BenchmarkRecordEncode(b *testing.B) {
	now := time.Now()
	r := &Record{Key: "0b8f7a4e-1f6c-4b8e-9a57-4d1c2e3f4a5b", OperationID: "order-4827/charge",
		Method: http.MethodPost, URL: "https://api.example.com/v1/payments",
		Header:     http.Header{"Content-Type": {"application/json"}, "User-Agent": {"idem"}},
		BodySHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Created:    now, Updated: now, State: StatePending}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(storedRecord{Record: r}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := appendJSON(r, make([]byte, 0, 512), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendBinary", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			if _, err := appendBinary(r, buf, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
