// Tests for Options.Journal.Encryption: key rotation, a key removed too early,
// and keyrings refused up front. Encryption turned on over a plaintext
// journal and tampered files are in journal/boltjournal (seal_test.go).

package idem

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// sealedFixture is a journal path and a server that answers 503 while
// failing is set, 201 otherwise, recording what it receives.
type sealedFixture struct {
	path    string
	srv     *recordingServer
	failing atomic.Bool
}

func newSealedFixture(t *testing.T) *sealedFixture {
	f := &sealedFixture{path: filepath.Join(t.TempDir(), "sealed.journal")}
	f.failing.Store(true)
	f.srv = newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if f.failing.Load() {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	return f
}

// open opens the fixture's journal with kr (nil: no encryption) and a
// Transport over it with a fake clock. The journal closes with the test, or
// earlier by the caller.
func (f *sealedFixture) open(t *testing.T, kr *boltjournal.Keyring) (*boltjournal.Journal, *Transport) {
	t.Helper()
	opts := Options{MaxAttempts: 1, Journal: boltjournal.Options{Encryption: kr}}
	j, err := boltjournal.Open(f.path, &opts.Journal)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	tr, _ := transportOn(t, j, opts, f.srv.base(), time.Time{})
	return j, tr
}

// leavePending sends one payment under operation ID op; the server is
// failing, so it stays pending. It returns the body sent.
func (f *sealedFixture) leavePending(t *testing.T, tr *Transport, op string) string {
	t.Helper()
	body := paymentBody(op+"-4111111111111111", 700)
	req := newRequest(t, http.MethodPost, f.srv.URL+"/payments", body)
	req = req.WithContext(WithOperationID(context.Background(), op))
	req.Header.Set("X-Trace", "trace-"+op)
	_, err := tr.RoundTrip(req)
	pendingErr(t, err)
	return body
}

// outcomesByOp moves tr's clock an hour on, so that every pending operation
// is due, resumes them and returns the outcomes by operation ID.
func outcomesByOp(t *testing.T, tr *Transport) map[string]Outcome {
	t.Helper()
	tr.clock.(*fakeClock).Advance(time.Hour)
	outs := map[string]Outcome{}
	for _, o := range resumeAll(t, tr) {
		outs[o.Record.OperationID] = o
	}
	return outs
}

func keyIDs(t *testing.T, j *boltjournal.Journal) map[string]string {
	t.Helper()
	recs, err := j.Records()
	require.NoError(t, err)
	ids := map[string]string{}
	for _, r := range recs {
		ids[r.OperationID] = r.EncryptionKeyID
	}
	return ids
}

func TestKeyRotation(t *testing.T) {
	f := newSealedFixture(t)
	ka, kb := newKey32(t), newKey32(t)
	onlyA := &boltjournal.Keyring{Current: "A", Keys: map[string][]byte{"A": ka}}
	rotated := &boltjournal.Keyring{Current: "B", Keys: map[string][]byte{"A": ka, "B": kb}}
	onlyB := &boltjournal.Keyring{Current: "B", Keys: map[string][]byte{"B": kb}}

	j, tr := f.open(t, onlyA)
	bodyA := f.leavePending(t, tr, "rot-a")
	require.NoError(t, j.Close())

	// Rotated: new records use B, the old one still reads under A.
	j, tr = f.open(t, rotated)
	bodyB := f.leavePending(t, tr, "rot-b")
	require.Equal(t, map[string]string{"rot-a": "A", "rot-b": "B"}, keyIDs(t, j))
	rec, err := j.Lookup("rot-a")
	require.NoError(t, err)
	require.Equal(t, bodyA, string(rec.Body))
	require.Equal(t, "trace-rot-a", rec.Header.Get("X-Trace"))
	require.NoError(t, j.Close())

	// A removed while a record still needs it: that record is reported and
	// stays pending; the other one is sent.
	f.failing.Store(false)
	sentBefore := len(f.srv.requests())
	j, tr = f.open(t, onlyB)
	outs := outcomesByOp(t, tr)
	require.Len(t, outs, 2)
	require.ErrorIs(t, outs["rot-a"].Err, journal.ErrUnknownEncryptionKey)
	require.Contains(t, outs["rot-a"].Err.Error(), `"A"`, "the error names the key ID")
	require.Nil(t, outs["rot-a"].Response)
	require.NoError(t, outs["rot-b"].Err)
	require.Equal(t, http.StatusCreated, outs["rot-b"].Response.StatusCode)
	seen := f.srv.requests()
	require.Len(t, seen, sentBefore+1, "only rot-b was sent")
	require.Equal(t, bodyB, string(seen[len(seen)-1].Body))

	_, err = j.Lookup("rot-a")
	require.ErrorIs(t, err, journal.ErrUnknownEncryptionKey)
	recs, err := j.Records()
	require.NoError(t, err, "a listing shows what it cannot open")
	require.Len(t, recs, 2)
	require.Equal(t, "rot-a", recs[0].OperationID)
	require.Equal(t, StatePending, recs[0].State)
	require.True(t, recs[0].Sealed)
	require.Nil(t, recs[0].Body)
	require.Nil(t, recs[0].Header)
	require.False(t, recs[1].Sealed)

	// A new call with the operation ID sends nothing either.
	req := newRequest(t, http.MethodPost, f.srv.URL+"/payments", bodyA)
	_, err = tr.RoundTrip(req.WithContext(WithOperationID(context.Background(), "rot-a")))
	require.ErrorIs(t, err, journal.ErrUnknownEncryptionKey)
	require.Len(t, f.srv.requests(), sentBefore+1)
	require.NoError(t, j.Close())

	// No keyring at all: a Client is refused (its new records would be
	// plaintext); a journal opened without one takes no new record, and
	// Resume reports rot-a with the same typed error.
	_, err = Open(f.path, &Options{MaxAttempts: 1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	j, tr = f.open(t, nil)
	outs = outcomesByOp(t, tr)
	require.ErrorIs(t, outs["rot-a"].Err, journal.ErrUnknownEncryptionKey)
	_, err = tr.RoundTrip(newRequest(t, http.MethodPost, f.srv.URL+"/payments", paymentBody("plain", 1)))
	require.ErrorIs(t, err, ErrInvalidOptions, "no plaintext record in a sealed journal")
	require.Len(t, f.srv.requests(), sentBefore+1)
	require.NoError(t, j.Close())

	// A back: the operation was never dropped, and goes out as journaled.
	_, tr = f.open(t, rotated)
	outs = outcomesByOp(t, tr)
	require.Len(t, outs, 1)
	require.NoError(t, outs["rot-a"].Err)
	seen = f.srv.requests()
	require.Len(t, seen, sentBefore+2)
	require.Equal(t, bodyA, string(seen[len(seen)-1].Body))
	require.Equal(t, seen[0].Header.Get(DefaultKeyHeader), seen[len(seen)-1].Header.Get(DefaultKeyHeader),
		"the key of rot-a's first attempt")
	require.Equal(t, "trace-rot-a", seen[len(seen)-1].Header.Get("X-Trace"))
}

func TestEncryptionInvalidKeyring(t *testing.T) {
	good := newKey32(t)
	for _, tc := range []struct {
		name string
		kr   *boltjournal.Keyring
	}{
		{"no keys", &boltjournal.Keyring{Current: "k"}},
		{"current missing", &boltjournal.Keyring{Current: "x", Keys: map[string][]byte{"k": good}}},
		{"empty current", &boltjournal.Keyring{Keys: map[string][]byte{"k": good}}},
		{"empty key ID", &boltjournal.Keyring{Current: "", Keys: map[string][]byte{"": good}}},
		{"key ID with a space", &boltjournal.Keyring{Current: "k 1", Keys: map[string][]byte{"k 1": good}}},
		{"key too short", &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": good[:16]}}},
		{"key too long", &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": append(bytes.Clone(good), 0)}}},
		{"old key bad", &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": good, "old": {1, 2, 3}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := &Options{Journal: boltjournal.Options{Encryption: tc.kr}}
			path := filepath.Join(t.TempDir(), "bad.journal")
			_, err := boltjournal.Open(path, &opts.Journal)
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.Contains(t, err.Error(), "Encryption")
			_, err = Open(path, opts)
			require.ErrorIs(t, err, ErrInvalidOptions)
			_, err = NewTransport(nil, opts)
			require.ErrorIs(t, err, ErrInvalidOptions)
			_, statErr := os.Stat(path)
			require.ErrorIs(t, statErr, os.ErrNotExist, "nothing written")
		})
	}
}

func TestKeyringCopiedWhenOpened(t *testing.T) {
	f := newSealedFixture(t)
	key := newKey32(t)
	kr := &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": key}}
	j, tr := f.open(t, kr)
	body := f.leavePending(t, tr, "c1")
	clear(key) // the caller wipes its copy
	kr.Current = "gone"
	rec, err := j.Lookup("c1")
	require.NoError(t, err)
	require.Equal(t, body, string(rec.Body))
}
