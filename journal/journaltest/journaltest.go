// This file holds Run, its Config, and the helpers its subtests share: the
// records they write and how they compare what a Store returns. The
// subtests are grouped by what they exercise: create.go (Create, Get,
// duplicates, copies), update.go (Update, Flush, settle, repend),
// pending.go (Pending, PendingCount), store.go (claims, identity key,
// LatestWritten, Close, damage, pruning), seal.go (sealing under a
// Keyring), all.go (journal.Lister's All).

package journaltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/seal"
)

// Config tells Run how to get the Stores it tests. Only Open is required;
// a nil hook skips the subtests that need it.
type Config struct {
	// Open returns a new, empty Store, for the calling subtest alone. Run
	// closes it. Subtests run in parallel, so Open is called concurrently.
	Open func(t *testing.T) journal.Store

	// Reopen closes old, a Store Open or Reopen returned, and returns a new
	// Store over the same storage, as a process restarting would: what old
	// made durable must be there. nil for a Store that keeps nothing
	// across a close (its durability is then not tested).
	Reopen func(t *testing.T, old journal.Store) journal.Store

	// Damage alters, in s's storage, the body of rec, a pending record s
	// created, so that it no longer hashes to rec.BodySHA256, as a damaged
	// disk would. It returns the Store to use from then on: s, or, if it
	// had to close s to reach the storage, a Store reopened over it. nil
	// skips the damage subtests.
	Damage func(t *testing.T, s journal.Store, rec *journal.Record) journal.Store

	// Seal, for a Store that seals records under a seal.Keyring (as
	// Options.Encryption asks of idem's Stores), closes old unless it is
	// nil and returns a Store over the same storage that seals new records
	// under k (nil: a Store without a Keyring); with old nil, over new,
	// empty storage for the calling subtest alone. nil skips the sealing
	// subtests (seal.go).
	Seal func(t *testing.T, old journal.Store, k *seal.Keyring) journal.Store

	// Raw returns what s's storage holds of its records as someone reading
	// it without the Store sees it: a file's bytes, or rows as psql prints
	// them. The sealing subtests check that a sealed record's request is
	// not in it in the clear. nil skips that check.
	Raw func(t *testing.T, s journal.Store) []byte
}

// Pruner is implemented by a Store that deletes finished records itself.
// Prune deletes the settled, failed and expired records last updated
// (Record.Updated) more than retention ago, by the Store's clock, and
// returns how many it deleted; it never deletes a pending record. Once
// pruned, a record is gone: Get and Reload return nil, Update of a repend
// fails with journal.ErrGone, and its operation ID and key are free to name
// a new operation. Run tests it on a Store that implements it.
type Pruner interface {
	Prune(retention time.Duration) (int, error)
}

// Run runs the conformance suite against the Stores c opens, one subtest
// per rule of the journal.Store contract, in parallel.
func Run(t *testing.T, c Config) {
	t.Helper()
	if c.Open == nil {
		t.Fatal("journaltest: Config.Open is nil")
	}
	for _, group := range [][]subtest{createTests, updateTests, pendingTests, storeTests, sealTests, allTests} {
		for _, st := range group {
			t.Run(st.name, func(t *testing.T) {
				t.Parallel()
				st.fn(t, &c)
			})
		}
	}
}

// subtest is one rule of the contract, checked on a Store of its own.
type subtest struct {
	name string
	fn   func(t *testing.T, c *Config)
}

// store is the Store a subtest works on. Reopen and damage may swap it for
// a new one; the subtest's cleanup closes whichever is current.
type store struct {
	journal.Store
	t *testing.T
	c *Config
}

// open opens a fresh Store for t and closes it when t ends.
func open(t *testing.T, c *Config) *store {
	t.Helper()
	s := &store{Store: c.Open(t), t: t, c: c}
	if s.Store == nil {
		t.Fatal("Config.Open returned a nil Store")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// needReopen skips t unless the Config can reopen a Store.
func needReopen(t *testing.T, c *Config) {
	t.Helper()
	if c.Reopen == nil {
		t.Skip("Config.Reopen is nil: durability across a reopen is not tested")
	}
}

// reopen closes the Store and opens its storage again.
func (s *store) reopen() {
	s.t.Helper()
	s.Store = s.c.Reopen(s.t, s.Store)
	if s.Store == nil {
		s.t.Fatal("Config.Reopen returned a nil Store")
	}
}

var ctx = context.Background()

// now is the time the suite writes records at: the wall clock, without its
// monotonic reading, to the microsecond.
func now() time.Time { return time.Now().Truncate(time.Microsecond) }

// newRecord returns a new pending record named by the operation ID "op-"+id,
// with a key idem minted ("key-"+id, CallerKey false), made with
// journal.Apply as the Transport makes one.
func newRecord(t *testing.T, id string) *journal.Record {
	t.Helper()
	body := []byte(`{"amount":1250,"currency":"eur","reference":"` + id + `"}`)
	rec := &journal.Record{
		Key:             "key-" + id,
		OperationID:     "op-" + id,
		Method:          http.MethodPost,
		URL:             "https://api.example.test/v1/payments?ref=" + id,
		Header:          http.Header{"Content-Type": {"application/json"}, "X-Reference": {id}},
		Dropped:         []string{"Authorization"},
		DroppedQuery:    []string{"token"},
		Identity:        "tenant-a",
		ContentType:     "application/json",
		ContentEncoding: "",
		Body:            body,
		BodySHA256:      journal.BodySum(body),
	}
	if _, err := journal.Apply(rec, journal.EventCreate, journal.Change{Now: now()}); err != nil {
		t.Fatal(err)
	}
	return rec
}

// newKeyed returns a new pending record with no operation ID, named by its
// caller-chosen key.
func newKeyed(t *testing.T, key string) *journal.Record {
	t.Helper()
	rec := newRecord(t, key)
	rec.OperationID, rec.Key, rec.CallerKey = "", key, true
	return rec
}

// create creates rec in s, failing t if it cannot.
func create(t *testing.T, s journal.Store, rec *journal.Record) *journal.Record {
	t.Helper()
	if err := s.Create(ctx, rec); err != nil {
		t.Fatalf("Create(%s): %v", journal.NameOf(rec), err)
	}
	if journal.RefOf(rec).Seq == 0 {
		t.Fatalf("Create(%s) left the record's Ref.Seq zero", journal.NameOf(rec))
	}
	return rec
}

// get returns what s holds under name, failing t on an error.
func get(t *testing.T, s journal.Store, name journal.Name) *journal.Record {
	t.Helper()
	got, err := s.Get(ctx, name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	return got
}

// mustGet is get for a record that must be there.
func mustGet(t *testing.T, s journal.Store, name journal.Name) *journal.Record {
	t.Helper()
	got := get(t, s, name)
	if got == nil {
		t.Fatalf("Get(%s) = nil, want the record", name)
	}
	return got
}

// apply moves rec through e, failing t if the state machine refuses.
func apply(t *testing.T, rec *journal.Record, e journal.Event, c journal.Change) {
	t.Helper()
	if _, err := journal.Apply(rec, e, c); err != nil {
		t.Fatal(err)
	}
}

// update writes rec with d, failing t on an error.
func update(t *testing.T, s journal.Store, rec *journal.Record, d journal.Durability) {
	t.Helper()
	if err := s.Update(ctx, rec, d); err != nil {
		t.Fatalf("Update(%s, %v): %v", journal.NameOf(rec), d, err)
	}
}

// pending returns every record Pending(after) yields, failing t on an error.
func pending(t *testing.T, s journal.Store, after uint64) []*journal.Record {
	t.Helper()
	var recs []*journal.Record
	for rec, err := range s.Pending(ctx, after) {
		if err != nil {
			t.Fatalf("Pending(%d): %v", after, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// count returns PendingCount, failing t on an error.
func count(t *testing.T, s journal.Store) int {
	t.Helper()
	n, err := s.PendingCount(ctx)
	if err != nil {
		t.Fatalf("PendingCount: %v", err)
	}
	return n
}

// seqs returns the Ref.Seq of each record.
func seqs(recs []*journal.Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = journal.RefOf(r).Seq
	}
	return out
}

// body says whether same compares bodies.
type body bool

const (
	withBody    body = true
	withoutBody body = false
)

// same fails t unless got holds what want does: every field a Store keeps,
// times compared with Equal, nil and empty alike. With withoutBody, got
// must have no body. A settled record's Header is not compared: a Store
// may drop it with the body.
func same(t *testing.T, what string, got, want *journal.Record, b body) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil record, want %s", what, journal.NameOf(want))
	}
	var diffs []string
	diff := func(field string, g, w any) {
		diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", field, g, w))
	}
	str := func(field, g, w string) {
		if g != w {
			diff(field, fmt.Sprintf("%q", g), fmt.Sprintf("%q", w))
		}
	}
	tm := func(field string, g, w time.Time) {
		if !g.Equal(w) {
			diff(field, g, w)
		}
	}
	strs := func(field string, g, w []string) {
		if !slices.Equal(g, w) {
			diff(field, g, w)
		}
	}
	str("Key", got.Key, want.Key)
	str("OperationID", got.OperationID, want.OperationID)
	str("Method", got.Method, want.Method)
	str("URL", got.URL, want.URL)
	str("Host", got.Host, want.Host)
	if want.State != journal.StateSettled && !sameHeader(got.Header, want.Header) {
		diff("Header", got.Header, want.Header)
	}
	strs("Dropped", got.Dropped, want.Dropped)
	strs("DroppedQuery", got.DroppedQuery, want.DroppedQuery)
	if got.CallerKey != want.CallerKey {
		diff("CallerKey", got.CallerKey, want.CallerKey)
	}
	str("Identity", got.Identity, want.Identity)
	str("CredentialTag", got.CredentialTag, want.CredentialTag)
	str("ContentType", got.ContentType, want.ContentType)
	str("ContentEncoding", got.ContentEncoding, want.ContentEncoding)
	switch {
	case b == withBody && !bytes.Equal(got.Body, want.Body):
		diff("Body", fmt.Sprintf("%q", got.Body), fmt.Sprintf("%q", want.Body))
	case b == withoutBody && len(got.Body) != 0:
		diff("Body", fmt.Sprintf("%q", got.Body), "none")
	}
	str("BodySHA256", got.BodySHA256, want.BodySHA256)
	tm("Created", got.Created, want.Created)
	if got.State != want.State {
		diff("State", got.State, want.State)
	}
	if got.Attempts != want.Attempts {
		diff("Attempts", got.Attempts, want.Attempts)
	}
	tm("LastAttempt", got.LastAttempt, want.LastAttempt)
	tm("NextAttempt", got.NextAttempt, want.NextAttempt)
	if got.Status != want.Status {
		diff("Status", got.Status, want.Status)
	}
	str("LastError", got.LastError, want.LastError)
	tm("Updated", got.Updated, want.Updated)
	str("Location", got.Location, want.Location)
	if got.Sealed {
		diff("Sealed", got.Sealed, false)
	}
	if g, w := journal.RefOf(got).Seq, journal.RefOf(want).Seq; w != 0 && g != w {
		diff("Ref.Seq", g, w)
	}
	for _, d := range diffs {
		t.Errorf("%s: %s: %s", what, journal.NameOf(want), d)
	}
	if len(diffs) > 0 {
		t.FailNow()
	}
}

// sameHeader compares headers, nil and empty alike.
func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

// deepCopy returns a copy of rec sharing nothing with it, to hold what a
// Store was given while the original is changed.
func deepCopy(rec *journal.Record) *journal.Record {
	cp := *rec
	cp.Header = rec.Header.Clone()
	cp.Dropped = slices.Clone(rec.Dropped)
	cp.DroppedQuery = slices.Clone(rec.DroppedQuery)
	cp.Body = bytes.Clone(rec.Body)
	return &cp
}

// scribble changes rec in place everywhere it shares memory with whoever
// handed it over: the body's bytes, the header map and its values, the
// dropped names. A Store that kept them would see its record change.
func scribble(rec *journal.Record) {
	for i := range rec.Body {
		rec.Body[i] = 'X'
	}
	for _, v := range rec.Header {
		for i := range v {
			v[i] = "scribbled"
		}
	}
	if rec.Header != nil {
		rec.Header.Set("X-Scribbled", "1")
	}
	for i := range rec.Dropped {
		rec.Dropped[i] = "Scribbled"
	}
	for i := range rec.DroppedQuery {
		rec.DroppedQuery[i] = "scribbled"
	}
	rec.URL += "&scribbled=1"
	rec.LastError = "scribbled"
}
