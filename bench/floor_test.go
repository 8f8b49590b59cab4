// This file tests the floor client's record (floor.go) and the floor resume
// (floorresume.go): every record sent once across pages, the file emptied,
// and a refusing server ending the run with its status.

package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestFloorRecordRoundTrip(t *testing.T) {
	body := []byte("{\"a\":1}\nsecond line")
	method, url, ct, got, ok := parseFloorRecord(floorRecord("POST", "http://127.0.0.1:1/held", "application/json", body))
	if !ok || method != "POST" || url != "http://127.0.0.1:1/held" || ct != "application/json" || !bytes.Equal(got, body) {
		t.Errorf("parseFloorRecord(floorRecord(...)) = %q %q %q %q %v", method, url, ct, got, ok)
	}
	if _, _, _, _, ok := parseFloorRecord([]byte("POST\nhttp://x")); ok {
		t.Error("parseFloorRecord accepted a record without its content type line")
	}
}

// TestFloorResumeSendsEachOnce resumes a floor backlog of several pages: the
// server sees every key once, with the body, and the file is empty after.
func TestFloorResumeSendsEachOnce(t *testing.T) {
	const n = 2*floorPage + 88
	body := resumeBody(resumeBodyBytes)
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got bytes.Buffer
		got.ReadFrom(r.Body)
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		if r.Method != http.MethodPost || !bytes.Equal(got.Bytes(), body) || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "floor.journal")
	if err := makeFloorBacklog(path, srv.URL+"/held", body, n); err != nil {
		t.Fatal(err)
	}
	if _, err := floorResume(context.Background(), path, tunedTransport(8), n, 8); err != nil {
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
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if left := tx.Bucket(floorBucket).Stats().KeyN; left != 0 {
			t.Errorf("%d records left in the floor file after its resume", left)
		}
		return nil
	})
}

// TestFloorResumeFails ends with the server's refusal, without hanging.
func TestFloorResumeFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "floor.journal")
	if err := makeFloorBacklog(path, srv.URL+"/held", []byte(`{}`), 3*floorPage); err != nil {
		t.Fatal(err)
	}
	_, err := floorResume(context.Background(), path, tunedTransport(8), 3*floorPage, 8)
	if err == nil || !strings.Contains(err.Error(), "status 503") {
		t.Errorf("floorResume against a server answering 503: %v, want the status", err)
	}
}
