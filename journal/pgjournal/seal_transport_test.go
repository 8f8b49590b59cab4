// Sealed rows through idem's Transport, as the bbolt journal's
// TestKeyRotation runs them: a key rotated, a key removed while a row
// still needs it, no Keyring at all, and the key put back.

package pgjournal_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/pgjournal"
	"github.com/jackc/pgx/v5/pgxpool"
)

// arrival is a request as the server got it.
type arrival struct {
	key, trace string
	body       []byte
}

// failingServer answers 503 while failing is set and 201 otherwise, and
// keeps every request it gets.
type failingServer struct {
	*httptest.Server
	failing atomic.Bool
	mu      sync.Mutex
	got     []arrival
}

func newFailingServer(t *testing.T) *failingServer {
	s := &failingServer{}
	s.failing.Store(true)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, arrival{r.Header.Get(idem.DefaultKeyHeader), r.Header.Get("X-Trace"), body})
		s.mu.Unlock()
		if s.failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *failingServer) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.got...)
}

// sealedInstance opens the namespace "sealed" of schema with kr and a
// Transport over it that makes one attempt per call and waits a
// millisecond before a resume may send again. The Journal closes with the
// test, or earlier by the caller.
func sealedInstance(t *testing.T, pool *pgxpool.Pool, schema string, kr *boltjournal.Keyring) (*pgjournal.Journal, *idem.Transport) {
	t.Helper()
	j, err := pgjournal.Open(context.Background(), pool, &pgjournal.Options{Schema: schema, Namespace: "sealed", Encryption: kr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	tr, err := idem.NewTransport(j, &idem.Options{MaxAttempts: 1, Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	return j, tr
}

// cardPayment is a payment with a card number under the operation ID op.
func cardPayment(t *testing.T, url, op string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(idem.WithOperationID(context.Background(), op), http.MethodPost, url+"/payments",
		strings.NewReader(`{"amount":700,"card":"4111111111111111","reference":"`+op+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Trace", "trace-"+op)
	return req
}

// resumeOutcomes resumes what is due once the Transport's backoff has
// passed, and returns the outcomes by operation ID.
func resumeOutcomes(t *testing.T, tr *idem.Transport) map[string]idem.Outcome {
	t.Helper()
	time.Sleep(2 * time.Millisecond) // past the millisecond of backoff
	outs := map[string]idem.Outcome{}
	err := tr.Resume(context.Background(), func(o idem.Outcome) {
		if o.Response != nil {
			o.Response.Body.Close()
		}
		outs[o.Record.OperationID] = o
	})
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

func TestSealedKeyRotationThroughTransport(t *testing.T) {
	pool, schema := fleetPool(t)
	srv := newFailingServer(t)
	ka, kb := bytes.Repeat([]byte{0xa}, boltjournal.KeySize), bytes.Repeat([]byte{0xb}, boltjournal.KeySize)
	onlyA := &boltjournal.Keyring{Current: "A", Keys: map[string][]byte{"A": ka}}
	rotated := &boltjournal.Keyring{Current: "B", Keys: map[string][]byte{"A": ka, "B": kb}}
	onlyB := &boltjournal.Keyring{Current: "B", Keys: map[string][]byte{"B": kb}}
	var pe *idem.PendingError

	j, tr := sealedInstance(t, pool, schema, onlyA)
	if _, err := tr.RoundTrip(cardPayment(t, srv.URL, "rot-a")); !errors.As(err, &pe) {
		t.Fatalf("RoundTrip rot-a = %v, want a *PendingError", err)
	}
	j.Close()

	// Rotated: a call and an enqueued one are sealed under B.
	j, tr = sealedInstance(t, pool, schema, rotated)
	if _, err := tr.RoundTrip(cardPayment(t, srv.URL, "rot-b")); !errors.As(err, &pe) {
		t.Fatalf("RoundTrip rot-b = %v, want a *PendingError", err)
	}
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgjournal.NewOutbox(j, tr).EnqueueTx(context.Background(), tx, cardPayment(t, srv.URL, "rot-c")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	kids := map[string]string{}
	for rec, err := range pgjournal.Records(context.Background(), pool, &pgjournal.Options{Schema: schema, Namespace: "sealed"}, true) {
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Sealed || rec.Body != nil {
			t.Fatalf("Records without a Keyring: %s not listed Sealed, or with its body", rec.OperationID)
		}
		kids[rec.OperationID] = rec.EncryptionKeyID
	}
	if want := map[string]string{"rot-a": "A", "rot-b": "B", "rot-c": "B"}; !maps.Equal(kids, want) {
		t.Fatalf("key IDs %v, want %v", kids, want)
	}
	j.Close()

	// A removed while rot-a still needs it: rot-a is reported and not
	// sent, and stays pending; the others are sent.
	srv.failing.Store(false)
	sent := len(srv.arrivals())
	j, tr = sealedInstance(t, pool, schema, onlyB)
	outs := resumeOutcomes(t, tr)
	if err := outs["rot-a"].Err; !errors.Is(err, journal.ErrUnknownEncryptionKey) || !strings.Contains(err.Error(), `"A"`) || outs["rot-a"].Response != nil {
		t.Fatalf("resume of rot-a under a Keyring without A: %v, want ErrUnknownEncryptionKey naming \"A\", no response", err)
	}
	for _, op := range []string{"rot-b", "rot-c"} {
		if o := outs[op]; o.Err != nil || o.Response == nil || o.Response.StatusCode != http.StatusCreated {
			t.Fatalf("resume of %s: %+v", op, o)
		}
	}
	if got := srv.arrivals(); len(got) != sent+2 {
		t.Fatalf("the server got %d requests, want %d: rot-b and rot-c only", len(got), sent+2)
	}
	if _, err := tr.RoundTrip(cardPayment(t, srv.URL, "rot-a")); !errors.Is(err, journal.ErrUnknownEncryptionKey) {
		t.Fatalf("a call with rot-a's operation ID = %v, want ErrUnknownEncryptionKey", err)
	}
	j.Close()

	// No Keyring at all: rot-a is reported the same, and a new call is
	// refused rather than journaled in plaintext.
	j, tr = sealedInstance(t, pool, schema, nil)
	if err := resumeOutcomes(t, tr)["rot-a"].Err; !errors.Is(err, journal.ErrUnknownEncryptionKey) {
		t.Fatalf("resume of rot-a without a Keyring: %v, want ErrUnknownEncryptionKey", err)
	}
	if _, err := tr.RoundTrip(cardPayment(t, srv.URL, "plain")); !errors.Is(err, idem.ErrInvalidOptions) {
		t.Fatalf("a new call without a Keyring in a sealed namespace = %v, want ErrInvalidOptions", err)
	}
	if got := srv.arrivals(); len(got) != sent+2 {
		t.Fatalf("the server got %d requests, want %d: nothing more", len(got), sent+2)
	}
	j.Close()

	// A back: rot-a goes out as journaled, under its first attempt's key.
	_, tr = sealedInstance(t, pool, schema, rotated)
	outs = resumeOutcomes(t, tr)
	if o := outs["rot-a"]; len(outs) != 1 || o.Err != nil || o.Response.StatusCode != http.StatusCreated {
		t.Fatalf("resume with A back: %v", outs)
	}
	got := srv.arrivals()
	first, last := got[0], got[len(got)-1]
	if last.key != first.key || !bytes.Equal(last.body, first.body) || last.trace != "trace-rot-a" {
		t.Fatalf("rot-a resent as %+v, first sent as %+v: want the same key, body and headers", last, first)
	}
}
