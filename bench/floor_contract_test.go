// This file tests the contract floor (floor_contract.go): its settled record
// is idem's in length and layout, and its POSTs send a UUID key and idem's
// attempt header and leave only settled records behind.

package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idem-go/idem"
	bolt "go.etcd.io/bbolt"
)

// doneValues reads every value of bucket in the bbolt file at path.
func doneValues(t *testing.T, path string, bucket string) [][]byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var vs [][]byte
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucket)).ForEach(func(_, v []byte) error {
			vs = append(vs, bytes.Clone(v))
			return nil
		})
	})
	return vs
}

// failingTransport fails every request, as a dropped connection would.
type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, io.ErrUnexpectedEOF
}

// TestContractFloorWritesIdemsBytes sends one POST through idem and three
// through the contract floor: the floor's settled records have the length of
// idem's, and its bytes where neither a key, a credential tag nor a time
// is; each request carried a fresh UUID key and the attempt header; no
// write-ahead is left.
func TestContractFloorWritesIdemsBytes(t *testing.T) {
	uuidRe := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	keys := map[string]string{} // each key sent, to its attempt header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		keys[r.Header.Get("Idempotency-Key")] = r.Header.Get(idem.AttemptHeader)
		if r.URL.Path == pathHeld {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	dir := t.TempDir()
	url := srv.URL + pathPayments

	ic, err := idem.Open(filepath.Join(dir, "idem.journal"), &idem.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := sender(ic.HTTPClient(), http.MethodPost, url, paymentBody, http.StatusCreated)(t.Context()); err != nil {
		t.Fatal(err)
	}
	// One left pending, for its write-ahead's bytes.
	if err := sender(ic.HTTPClient(), http.MethodPost, srv.URL+pathHeld, paymentBody, http.StatusCreated)(t.Context()); err == nil {
		t.Fatal("a POST answered 503 did not stay pending")
	}
	if err := ic.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := newContractFloor(filepath.Join(dir, "contract.journal"), http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	// One not settled, for its write-ahead's bytes: its send fails.
	unsent, err := newContractFloor(filepath.Join(dir, "unsent.journal"), failingTransport{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sender(&http.Client{Transport: unsent}, http.MethodPost, srv.URL+pathHeld, paymentBody, http.StatusCreated)(t.Context()); err == nil {
		t.Fatal("a POST through a failing transport succeeded")
	}
	if err := unsent.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := sender(&http.Client{Transport: f}, http.MethodPost, url, paymentBody, http.StatusCreated)(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	want := doneValues(t, filepath.Join(dir, "idem.journal"), "done")
	got := doneValues(t, filepath.Join(dir, "contract.journal"), "done")
	if len(want) != 1 || len(got) != 3 {
		t.Fatalf("%d settled records in idem's journal, %d in the contract floor's; want 1 and 3", len(want), len(got))
	}
	// Tag and flags, key (16), operation ID to identity, credential tag
	// (16), content type to the SHA-256, then the times.
	keyEnd := 18
	credAt := keyEnd + 1 + 1 + len("POST") + 1 + len(url) + 5
	shaEnd := credAt + 16 + 1 + len("application/json") + 1 + 32
	for _, g := range got {
		// The times are varints of nanoseconds, so a record's length may
		// differ from idem's by a byte or two; everything before them must not.
		if d := len(g) - len(want[0]); d < -2 || d > 2 || len(g) < shaEnd {
			t.Errorf("contract floor's settled record is %d bytes, idem's %d:\n%q\n%q", len(g), len(want[0]), g, want[0])
			continue
		}
		if !bytes.Equal(g[:2], want[0][:2]) || !bytes.Equal(g[keyEnd:credAt], want[0][keyEnd:credAt]) ||
			!bytes.Equal(g[credAt+16:shaEnd], want[0][credAt+16:shaEnd]) {
			t.Errorf("contract floor's settled record differs from idem's beyond keys and times:\n%q\n%q", g, want[0])
		}
	}
	// The write-aheads: idem's was updated after its attempt (attempts,
	// times, status), so they match from the flags to the SHA-256, with the
	// header, and in length less that update's.
	wantWA := doneValues(t, filepath.Join(dir, "idem.journal"), "pending")
	gotWA := doneValues(t, filepath.Join(dir, "unsent.journal"), string(floorBucket))
	if len(wantWA) != 1 || len(gotWA) != 1 {
		t.Fatalf("%d write-aheads in idem's journal, %d in the contract floor's; want 1 and 1", len(wantWA), len(gotWA))
	}
	heldURL := srv.URL + pathHeld
	waCred := keyEnd + 1 + 1 + len("POST") + 1 + len(heldURL) + 1 + len("\x01\x0cContent-Type\x02\x10application/json") + 3
	waSHA := waCred + 16 + 1 + len("application/json") + 1 + 32
	g, w := gotWA[0], wantWA[0]
	// idem's update wrote attempts 1, the last and next attempt times and
	// status 503: 1 + 9 + 10 + 1 bytes more, give or take a varint's byte.
	if d := len(w) - len(g); d < 19 || d > 23 || !bytes.Equal(g[:2], w[:2]) || !bytes.Equal(g[keyEnd:waCred], w[keyEnd:waCred]) ||
		!bytes.Equal(g[waCred+16:waSHA], w[waCred+16:waSHA]) || !bytes.Equal(g[len(g)-len(paymentBody)-4:], w[len(w)-len(paymentBody)-4:]) {
		t.Errorf("contract floor's write-ahead differs from idem's beyond keys, times and the attempt's update:\n%q\n%q", g, w)
	}
	if left := doneValues(t, filepath.Join(dir, "contract.journal"), string(floorBucket)); len(left) != 0 {
		t.Errorf("%d write-aheads left in the contract floor's file", len(left))
	}
	if len(keys) != 5 {
		t.Errorf("%d distinct keys sent, want 5", len(keys))
	}
	attempts := map[string]int{}
	for k, attempt := range keys {
		if !uuidRe.MatchString(k) {
			t.Errorf("key %q is not a version 4 UUID", k)
		}
		attempts[attempt]++
	}
	// idem's two (MaxAttempts 1), and the floor's three as idem's defaults send them.
	if attempts["attempt=1; max=1"] != 2 || attempts["attempt=1; max=6"] != 3 {
		t.Errorf("attempt headers sent %v, want idem's 2 of attempt=1; max=1 and the floor's 3 of attempt=1; max=6", attempts)
	}
}

// TestContractFloorResume resumes a contract backlog of several pages: every
// key sent once with the body and the journaled header, a settled record
// left for each and no write-ahead; a body that no longer matches its
// SHA-256 is refused, unsent.
func TestContractFloorResume(t *testing.T) {
	const n = 2*floorPage + 21
	body := resumeBody(resumeBodyBytes)
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		seen[r.Header.Get("Idempotency-Key")]++
		if !bytes.Equal(got, body) || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "contract.journal")
	if err := makeContractBacklog(path, srv.URL+pathHeld, body, n); err != nil {
		t.Fatal(err)
	}
	if _, err := floorResumeOf(t.Context(), path, tunedTransport(1), n, 1, true); err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Errorf("%d keys sent, want %d", len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("key %s sent %d times", k, c)
		}
	}
	if left := doneValues(t, path, string(floorBucket)); len(left) != 0 {
		t.Errorf("%d write-aheads left after the resume", len(left))
	}
	if done := doneValues(t, path, "done"); len(done) != n {
		t.Errorf("%d settled records, want %d", len(done), n)
	}

	// A damaged body: one byte of the first record's changed.
	damaged := filepath.Join(t.TempDir(), "damaged.journal")
	if err := makeContractBacklog(damaged, srv.URL+pathHeld, body, 1); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(damaged, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(floorBucket)
		k, v := b.Cursor().First()
		v = bytes.Clone(v)
		v[len(v)-5] ^= 1 // the body's last byte
		return b.Put(bytes.Clone(k), v)
	})
	db.Close()
	sent := len(seen)
	if _, err := floorResumeOf(t.Context(), damaged, tunedTransport(1), 1, 1, true); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("resume of a damaged body: %v, want its SHA-256 refused", err)
	}
	if len(seen) != sent {
		t.Error("a damaged body was sent")
	}
}
