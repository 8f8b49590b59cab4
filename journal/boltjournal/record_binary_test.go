package boltjournal

import (
	"bytes"
	"context"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/recordjson/recordjsontest"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// requireSameFields asserts got holds every field of want as the binary
// form keeps it: strings byte for byte, nil and empty lists apart, an empty
// header as none, times to the nanosecond with their offset.
func requireSameFields(tb testing.TB, want, got *Record) {
	tb.Helper()
	w, g := *want, *got
	if len(w.Header) == 0 {
		w.Header = nil
	}
	for _, at := range [][2]*time.Time{{&w.Created, &g.Created}, {&w.Updated, &g.Updated},
		{&w.LastAttempt, &g.LastAttempt}, {&w.NextAttempt, &g.NextAttempt}} {
		require.True(tb, at[0].Equal(*at[1]), "%v != %v", *at[0], *at[1])
		_, wo := at[0].Zone()
		_, gofs := at[1].Zone()
		require.Equal(tb, wo, gofs, "offset of %v", *at[0])
		*at[0], *at[1] = time.Time{}, time.Time{}
	}
	require.True(tb, reflect.DeepEqual(w, g), "\nwant %#v\ngot  %#v", w, g)
}

// Every record reads back from the binary form as it was, invalid UTF-8
// included (the JSON form wrote it as U+FFFD), with its sealed part.
func TestBinaryFormRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	for range 5000 {
		r := recordjsontest.Record(rng)
		if rng.IntN(2) == 0 {
			sum := make([]byte, 32)
			for i := range sum {
				sum[i] = byte(rng.UintN(256))
			}
			r.BodySHA256 = hex.EncodeToString(sum)
		}
		var box []byte
		if rng.IntN(2) == 0 {
			box = []byte(recordjsontest.Bytes(rng))
		}
		meta, err := appendBinary(r, nil, box)
		require.NoError(t, err)
		got, err := unmarshalStored(meta)
		require.NoError(t, err, "%x", meta)
		requireSameFields(t, r, got.Record)
		require.Equal(t, len(box) == 0, got.Box == nil)
		require.True(t, bytes.Equal(box, got.Box))
	}
}

// A truncated or altered binary record is refused with an error, never a
// panic, and never read as another record of the same length.
func TestBinaryFormRefusesDamage(t *testing.T) {
	t.Parallel()
	r := fuzzSeeds()[0]
	meta, err := appendBinary(r, nil, nil)
	require.NoError(t, err)
	for n := range len(meta) {
		_, err := unmarshalStored(meta[:n])
		require.Error(t, err, "a prefix of %d bytes", n)
	}
	bad := bytes.Clone(meta)
	bad[1] = 0x7f // unknown flags
	_, err = unmarshalStored(bad)
	require.ErrorIs(t, err, errStored)
}

// The binary form is what makes a commit small: the write-ahead record of
// a typical POST in about a third of the JSON form's bytes.
func TestBinaryFormSize(t *testing.T) {
	at := time.Date(2026, 12, 2, 15, 0, 0, 123456789, time.UTC)
	r := &Record{Key: "0b8f7a4e-1f6c-4b8e-9a57-4d1c2e3f4a5b", Method: http.MethodPost,
		URL: "http://127.0.0.1:40000/payments", Header: http.Header{"Content-Type": {"application/json"}},
		ContentType: "application/json", CredentialTag: "5d0c1f0a3b2e4d6c8a9b7e1f2c3d4e5f",
		BodySHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Created:    at, Updated: at, State: StatePending}
	bin, err := appendBinary(r, nil, nil)
	require.NoError(t, err)
	js, err := appendJSON(r, nil, nil)
	require.NoError(t, err)
	t.Logf("write-ahead metadata: binary %d bytes, JSON %d", len(bin), len(js))
	require.Less(t, len(bin)*2, len(js))
}

// A journal written before version 10 holds its records as JSON: they are
// read, resumed and settled, and what is written anew is binary.
func TestJSONRecordsOfOlderJournalsAreRead(t *testing.T) {
	j, path := testJournal(t)
	rec := &Record{Key: "k", OperationID: "op", Method: http.MethodPost, URL: "http://127.0.0.1/payments",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"amount":1}`),
		State: StatePending, Created: time.Now(), Updated: time.Now()}
	require.NoError(t, j.insert(rec, false))
	require.NoError(t, j.Close())
	tamper(t, path, "op", func(tx *bolt.Tx, id []byte) {
		old, err := appendJSON(rec, nil, nil)
		require.NoError(t, err)
		require.NoError(t, tx.Bucket(bucketPending).Put(id, old))
		require.NoError(t, tx.Bucket(bucketBodies).Put(id, rec.Body)) // where it was then
		require.NoError(t, tx.Bucket(bucketMeta).Put(metaVersion, []byte("idem-journal-8")))
	})
	j, err := Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	require.NoError(t, j.view(func(tx *bolt.Tx) error {
		require.Equal(t, "idem-journal-10", string(tx.Bucket(bucketMeta).Get(metaVersion)))
		return nil
	}))

	got, err := j.Lookup("op")
	require.NoError(t, err)
	require.Equal(t, rec.Body, got.Body)
	require.Equal(t, rec.Header, got.Header)
	n := 0
	for p, err := range j.Pending(context.Background(), 0) {
		require.NoError(t, err)
		require.Equal(t, "k", p.Key)
		n++
	}
	require.Equal(t, 1, n)

	got.State, got.Status = StateSettled, 201
	require.NoError(t, j.save(got))
	require.NoError(t, j.flush())
	require.NoError(t, j.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDone).Get(idKey(seqOf(got)))
		require.NotEmpty(t, v)
		require.Equal(t, byte(binaryTag), v[0], "written anew in the binary form")
		return nil
	}))
}
