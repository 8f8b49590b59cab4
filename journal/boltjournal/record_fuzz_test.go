// FuzzDecodeRecord feeds the journal's record decoder (record_seal.go)
// arbitrary metadata and body bytes, plaintext and sealed. Run it with
//
//	go test -run '^$' -fuzz FuzzDecodeRecord -fuzztime 2m -parallel 1 .
//
// Its seed corpus, testdata/fuzz/FuzzDecodeRecord, holds real records as
// encodeMeta and encodeBody write them, sealed under fuzzKeyring's key "fuzz".

package boltjournal

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/seal"
	"github.com/stretchr/testify/require"
)

// fuzzKeyring has one fixed key, "fuzz", so that sealed seeds written to the
// corpus open in every run, and a second, "other", for rotation.
func fuzzKeyring(tb testing.TB) *keyring {
	tb.Helper()
	key, other := make([]byte, KeySize), make([]byte, KeySize)
	for i := range key {
		key[i], other[i] = byte(i), byte(0xff-i)
	}
	k, err := build(&Keyring{Current: "fuzz", Keys: map[string][]byte{"fuzz": key, "other": other}})
	require.NoError(tb, err)
	return k
}

// fuzzSeeds are records as idem writes them, before encoding.
func fuzzSeeds() []*Record {
	at := time.Date(2026, 3, 1, 12, 30, 0, 123456789, time.UTC)
	pending := &Record{Key: "0b9c6a3e-5d7f-4e51-9a43-2f1d5c7e8b90", OperationID: "order-4827/charge",
		Method: http.MethodPost, URL: "https://api.test/v1/payments?mode=live#f",
		Header:  http.Header{"Content-Type": {"application/json"}, "X-Trace": {"t-1", "t-2"}},
		Dropped: []string{"Authorization"}, DroppedQuery: []string{"token"},
		Identity: "tenant-acme", ContentType: "application/json; charset=utf-8", ContentEncoding: "gzip",
		Body:       []byte(`{"amount":4200,"currency":"eur","card":"4111111111111111"}`),
		BodySHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Created:    at, Updated: at, State: StatePending, Attempts: 2, LastAttempt: at.Add(time.Second),
		NextAttempt: at.Add(time.Minute), Status: 503, LastError: "idem: 503"}
	settled := &Record{Key: "caller-key-1", CallerKey: true, Method: http.MethodPatch, URL: "http://127.0.0.1:8080/orders/7",
		Host: "orders.internal", CredentialTag: "5d0c1f0a3b2e4d6c8a9b7e1f2c3d4e5f", ContentType: "application/merge-patch+json", BodySHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Created: at, Updated: at.Add(time.Hour), State: StateSettled, Attempts: 1, Status: 201}
	moved := *pending // answered 307: sent to its Location from now on
	moved.Location = "https://eu.api.test/v2/payments?mode=live"
	var seeds []*Record
	for _, kid := range []string{"", "fuzz", "other"} {
		for _, r := range []*Record{pending, settled, &moved} {
			c := *r
			c.EncryptionKeyID = kid
			seeds = append(seeds, &c)
		}
	}
	return seeds
}

func FuzzDecodeRecord(f *testing.F) {
	k := fuzzKeyring(f)
	for _, r := range fuzzSeeds() {
		meta, err := k.encodeMeta(r)
		require.NoError(f, err)
		body, err := k.encodeBody(r)
		require.NoError(f, err)
		f.Add(meta, body)
		f.Add(withBody(meta, body), body) // as a small body is stored (inline.go)
	}
	f.Add([]byte(`{"kid":"nope","sealed":"AQID"}`), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, meta, body []byte) {
		target, peeked := peekTarget(meta)
		rec, sealErr, err := k.decodeStored(meta, body)
		if err != nil {
			require.Nil(t, rec)
			return
		}
		requirePeeked(t, meta, rec, target, peeked)
		if sealErr != nil {
			require.True(t, rec.Sealed)
			require.True(t, errors.Is(sealErr, journal.ErrDecrypt) || errors.Is(sealErr, journal.ErrUnknownEncryptionKey), sealErr)
			require.Nil(t, rec.Body)
			return
		}
		require.False(t, rec.Sealed)
		// Accepted: it re-encodes, and reads back as the same record.
		meta2, err := k.encodeMeta(rec)
		require.NoError(t, err)
		body2, err := k.encodeBody(rec)
		require.NoError(t, err)
		rec2, sealErr, err := k.decodeStored(meta2, body2)
		require.NoError(t, err)
		require.NoError(t, sealErr)
		requireSameRecord(t, rec, rec2)
	})
}

// requirePeeked asserts that peekTarget read from meta, the value rec was
// decoded from, rec's target: whole, or in a sealed record its part before
// the query. It reads every value in the binary form.
func requirePeeked(tb testing.TB, meta []byte, rec *Record, target []byte, ok bool) {
	tb.Helper()
	if len(meta) == 0 || meta[0] != binaryTag {
		require.False(tb, ok, "a JSON value has no target to peek")
		return
	}
	require.True(tb, ok)
	if rec.EncryptionKeyID == "" {
		require.Equal(tb, rec.Target(), string(target))
		return
	}
	plain, _ := seal.SplitURL(rec.Target())
	require.Equal(tb, plain, string(target))
}

// requireSameRecord asserts a and b hold the same record: the same JSON (the
// stored fields, times to the nanosecond and offset) and the same body.
func requireSameRecord(tb testing.TB, a, b *Record) {
	tb.Helper()
	ja, err := json.Marshal(storedRecord{Record: a})
	require.NoError(tb, err)
	jb, err := json.Marshal(storedRecord{Record: b})
	require.NoError(tb, err)
	require.Equal(tb, string(ja), string(jb))
	require.Equal(tb, a.Body, b.Body)
	require.Equal(tb, a.Sealed, b.Sealed)
}

func TestDecodeRecordSeedsRoundTrip(t *testing.T) {
	k := fuzzKeyring(t)
	for _, r := range fuzzSeeds() {
		meta, err := k.encodeMeta(r)
		require.NoError(t, err)
		body, err := k.encodeBody(r)
		require.NoError(t, err)
		got, sealErr, err := k.decodeStored(meta, body)
		require.NoError(t, err)
		require.NoError(t, sealErr)
		requireSameRecord(t, r, got)
		target, ok := peekTarget(withBody(meta, body))
		requirePeeked(t, meta, got, target, ok)
		if r.EncryptionKeyID != "" {
			require.NotContains(t, string(meta), "X-Trace")
			require.NotContains(t, string(meta), "mode=live")
			require.NotContains(t, string(meta), "tenant-acme")
			require.NotContains(t, string(meta), "5d0c1f0a3b2e")
			require.NotContains(t, string(meta), "json")
			require.NotContains(t, string(body), "4111")
		}
	}
}
