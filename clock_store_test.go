package idem

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/memjournal"
)

// clockedStore is a Store that keeps its own time (journal.Clock), as a
// shared database does: here an hour ahead of this machine.
type clockedStore struct {
	*memjournal.Store
	offset time.Duration
}

func (s clockedStore) Now() time.Time { return time.Now().Add(s.offset) }

// S30: a Transport over a Store with a clock dates and judges operations
// by the Store's time, not this machine's: a record due by the shared
// clock is sent, though this machine's clock says it is an hour early.
func TestS30TransportReadsTheStoresClock(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	store := clockedStore{Store: memjournal.New(nil), offset: time.Hour}
	tr, err := NewTransport(store, nil)
	if err != nil {
		t.Fatal(err)
	}

	req, _ := http.NewRequestWithContext(WithOperationID(context.Background(), "dated"), http.MethodPost,
		srv.URL, strings.NewReader("{}"))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec, err := store.Get(context.Background(), journal.Name{OperationID: "dated"})
	if err != nil || rec == nil {
		t.Fatalf("Get: %v, %v", rec, err)
	}
	if d := rec.Created.Sub(store.Now()); d < -time.Minute || d > time.Minute {
		t.Fatalf("the record was created %v from the Store's time, want by it", d)
	}

	// Due a second ago by the Store's clock, an hour ahead by this machine's.
	due := &Record{Key: "key-due", OperationID: "due", Method: http.MethodPost, URL: srv.URL, Body: []byte("{}")}
	due.BodySHA256 = journal.BodySum(due.Body)
	journal.Apply(due, journal.EventCreate, journal.Change{Now: store.Now().Add(-2 * time.Second)})
	due.Attempts, due.NextAttempt = 1, store.Now().Add(-time.Second)
	if err := store.Create(context.Background(), due); err != nil {
		t.Fatal(err)
	}
	before := hits.Load()
	if err := tr.Resume(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != before+1 {
		t.Fatalf("Resume sent %d requests, want the one due by the Store's clock", hits.Load()-before)
	}
}
