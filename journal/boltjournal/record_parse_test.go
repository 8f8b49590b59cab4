package boltjournal

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/recordjson/recordjsontest"
	"github.com/stretchr/testify/require"
)

// requireParsedAsJSON asserts that parseStored, when it takes meta, reads
// what encoding/json reads from it: every field, nil and empty apart, times
// to the nanosecond with their offset and zone name.
func requireParsedAsJSON(tb testing.TB, meta []byte) (taken bool) {
	tb.Helper()
	got, ok := parseStored(meta)
	if !ok {
		return false
	}
	want := storedRecord{Record: new(Record)}
	require.NoError(tb, json.Unmarshal(meta, &want), "parseStored took what encoding/json refuses: %q", meta)
	for _, at := range [][2]time.Time{{want.Created, got.Created}, {want.Updated, got.Updated},
		{want.LastAttempt, got.LastAttempt}, {want.NextAttempt, got.NextAttempt}} {
		require.True(tb, at[0].Equal(at[1]), "%q: %v != %v", meta, at[0], at[1])
		wn, wo := at[0].Zone()
		gn, gofs := at[1].Zone()
		require.Equal(tb, [2]any{wn, wo}, [2]any{gn, gofs}, "%q: zone", meta)
	}
	w, g := *want.Record, *got.Record
	w.Created, w.Updated, w.LastAttempt, w.NextAttempt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	g.Created, g.Updated, g.LastAttempt, g.NextAttempt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	require.True(tb, reflect.DeepEqual(w, g), "%q:\njson   %#v\nparsed %#v", meta, w, g)
	require.Equal(tb, want.Box == nil, got.Box == nil, "%q: sealed nil", meta)
	require.True(tb, bytes.Equal(want.Box, got.Box), "%q: sealed", meta)
	return true
}

// Every record appendJSON writes is read without encoding/json, and as it
// reads it; the journals idem writes never take the slow path.
func TestParseStoredReadsWhatAppendJSONWrites(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		r := recordjsontest.Record(rng)
		var box []byte
		if rng.IntN(2) == 0 {
			box = []byte(recordjsontest.Bytes(rng))
		}
		meta, err := appendJSON(r, nil, box)
		require.NoError(t, err)
		require.True(t, requireParsedAsJSON(t, meta), "record %d not taken: %s", i, meta)
	}
}

// What appendJSON never writes is left to encoding/json, which decides.
func TestParseStoredLeavesTheRestToEncodingJSON(t *testing.T) {
	const min = `{"key":"k","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":0,"updated":"2026-01-02T03:04:05Z"}`
	_, ok := parseStored([]byte(min))
	require.True(t, ok)
	for _, meta := range []string{
		` ` + min,
		`{"method":"POST","key":"k","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":0,"updated":"2026-01-02T03:04:05Z"}`,
		`{"KEY":"k","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":0,"updated":"2026-01-02T03:04:05Z"}`,
		`{"key":"\ud83d\ude42","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":0,"updated":"2026-01-02T03:04:05Z"}`,
		`{"key":"k","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":1.0,"updated":"2026-01-02T03:04:05Z"}`,
		`{"key":"k","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":256,"attempts":0,"updated":"2026-01-02T03:04:05Z"}`,
		`{"key":"k","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":01,"updated":"2026-01-02T03:04:05Z"}`,
		`{"key":"k","method":"POST","url":"u","sha256":"s","created":null,"state":1,"attempts":0,"updated":"2026-01-02T03:04:05Z"}`,
		`{"key":"k","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":0,"updated":"2026-01-02T03:04:05Z","x":1}`,
		`{"key":"k","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":0,"updated":"2026-01-02T03:04:05Z","sealed":"A\nB"}`,
		`{"key":"k","method":"POST","url":"u","sha256":"s","created":"2026-01-02T03:04:05Z","state":1,"attempts":0,"updated":"2026-01-02T03:04:05Z"}x`,
		"{\"key\":\"\xff\",\"method\":\"POST\",\"url\":\"u\",\"sha256\":\"s\",\"created\":\"2026-01-02T03:04:05Z\",\"state\":1,\"attempts\":0,\"updated\":\"2026-01-02T03:04:05Z\"}",
	} {
		_, ok := parseStored([]byte(meta))
		require.False(t, ok, "%s", meta)
		_, err := unmarshalStored([]byte(meta))
		var want storedRecord
		require.Equal(t, json.Unmarshal([]byte(meta), &want) == nil, err == nil, "%s", meta)
	}
}

// FuzzParseStored holds parseStored to encoding/json on any bytes: whatever
// it takes, encoding/json takes too, and reads the same. Run it with
//
//	go test -run '^$' -fuzz FuzzParseStored -fuzztime 1m -parallel 1 .
func FuzzParseStored(f *testing.F) {
	for _, r := range fuzzSeeds() {
		meta, err := appendJSON(r, nil, nil) // the JSON form older journals hold
		require.NoError(f, err)
		f.Add(meta)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		meta, err := appendJSON(recordjsontest.Record(rng), nil, []byte(recordjsontest.Bytes(rng)))
		require.NoError(f, err)
		f.Add(meta)
	}
	f.Fuzz(func(t *testing.T, meta []byte) {
		requireParsedAsJSON(t, meta)
	})
}

func BenchmarkRecordDecode(b *testing.B) {
	now := time.Now()
	r := &Record{Key: "0b8f7a4e-1f6c-4b8e-9a57-4d1c2e3f4a5b", OperationID: "order-4827/charge",
		Method: http.MethodPost, URL: "https://api.example.com/v1/payments?a=1&b=2",
		Header:     http.Header{"Content-Type": {"application/json"}, "User-Agent": {"idem"}},
		BodySHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Created:    now, Updated: now, LastAttempt: now, NextAttempt: now, State: StatePending, Attempts: 1,
		Status: 503, LastError: "idem: 503 Service Unavailable"}
	meta, err := appendJSON(r, nil, nil)
	require.NoError(b, err)
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s := storedRecord{Record: new(Record)}
			if err := json.Unmarshal(meta, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parseStored", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseStored(meta); !ok {
				b.Fatal("not taken")
			}
		}
	})
}
