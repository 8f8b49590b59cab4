// Test helpers shared by the package's tests: a fake clock, journals (in
// memory by default, bbolt in a temporary directory where a test needs the
// file), Transports over them, and a body that counts its Close calls.

package idem

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/memjournal"
	"github.com/stretchr/testify/require"
)

// fakeClock advances only when the code under test sleeps. It records every
// wait so tests can check them without sleeping for real.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	// onSleep, if set, runs before the fake time advances; a test can cancel a
	// context there to model a caller that gives up mid-wait.
	onSleep func(d time.Duration)
	timers  []*fakeTimer
}

// fakeTimer is a pending After: it fires when the fake time reaches at.
type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.onSleep != nil {
		c.onSleep(d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.fire()
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fire()
}

// After returns a channel that receives once the fake time has advanced by d.
func (c *fakeClock) After(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.fire()
	return t.c, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.timers = slices.DeleteFunc(c.timers, func(x *fakeTimer) bool { return x == t })
	}
}

// Timers reports how many Afters are waiting.
func (c *fakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextTimer returns when the earliest waiting After fires, or the zero time.
func (c *fakeClock) NextTimer() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, t := range c.timers {
		if next.IsZero() || t.at.Before(next) {
			next = t.at
		}
	}
	return next
}

// fire sends on every timer that is due. c.mu is held.
func (c *fakeClock) fire() {
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.at.After(c.now) {
			return false
		}
		t.c <- c.now
		return true
	})
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// testJournal opens a bbolt journal in a fresh temporary directory, closed
// at the end of the test. The directory is on a RAM file system when there
// is one (ramDir): the engine and its file, without the disk's fsync, which
// no test within one process can observe. Tests of the disk itself (crashes,
// a full disk, permissions) open their own path.
func testJournal(tb testing.TB) (*boltjournal.Journal, string) {
	tb.Helper()
	path := filepath.Join(ramDir(tb), "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { j.Close() })
	return j, path
}

// ramDir returns a fresh directory under /dev/shm when there is one, removed
// at the end of the test, and t.TempDir() otherwise.
func ramDir(tb testing.TB) string {
	tb.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "idem-test-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return tb.TempDir()
}

// memStore is a fresh in-memory journal (journal/memjournal), closed at the
// end of the test: the Store for Transport tests that need no file, so that
// they pay no fsync.
func memStore(tb testing.TB) *memjournal.Store {
	tb.Helper()
	s := memjournal.New(nil)
	tb.Cleanup(func() { s.Close() })
	return s
}

// memTransport builds a Transport over a fresh in-memory journal with a fake
// clock: the default for Transport tests. A test that needs the bbolt file
// (its bytes, a reopen, a crash, the boltjournal.Journal's own methods) uses
// boltTransport.
func memTransport(tb testing.TB, opts *Options) (*Transport, *fakeClock) {
	tb.Helper()
	return transportWith(tb, memStore(tb), opts)
}

// boltTransport builds a Transport over a fresh bbolt journal (testJournal)
// with a fake clock, and returns the journal too.
func boltTransport(tb testing.TB, opts *Options) (*Transport, *fakeClock, *boltjournal.Journal) {
	tb.Helper()
	j, _ := testJournal(tb)
	tr, clk := transportWith(tb, j, opts)
	return tr, clk, j
}

// testTransport is boltTransport without the journal. newScenario
// (scenarios_helpers_test.go) builds on it, and its callers read the bbolt
// journal through tr.bolt(); a new test that needs no file uses memTransport.
func testTransport(tb testing.TB, opts *Options) (*Transport, *fakeClock) {
	tb.Helper()
	tr, clk, _ := boltTransport(tb, opts)
	return tr, clk
}

// memScenario is newScenario over an in-memory journal: a Transport with a
// fake clock that sends to a fresh recording server (unless opts has a
// Base).
func memScenario(tb testing.TB, opts *Options, reply func(n int, w http.ResponseWriter, r *http.Request)) (*Transport, *fakeClock, *recordingServer) {
	tb.Helper()
	return scenarioOver(tb, memStore(tb), opts, reply)
}

// scenarioOver is newScenario over s.
func scenarioOver(tb testing.TB, s journal.Store, opts *Options, reply func(n int, w http.ResponseWriter, r *http.Request)) (*Transport, *fakeClock, *recordingServer) {
	tb.Helper()
	tr, clk := transportWith(tb, s, opts)
	srv := newRecordingServer(tb, clk, reply)
	if tr.cfg.Base == nil {
		tr.cfg.Base = srv.base()
	}
	return tr, clk, srv
}

// transportWith builds a Transport over s with a fake clock.
func transportWith(tb testing.TB, s journal.Store, opts *Options) (*Transport, *fakeClock) {
	tb.Helper()
	tr, err := NewTransport(s, opts)
	require.NoError(tb, err)
	clk := newFakeClock()
	tr.clock = clk
	return tr, clk
}

// recordLister is a Store that lists every record: the bbolt boltjournal.Journal and
// the in-memory Store both do.
type recordLister interface {
	Records() ([]*Record, error)
}

// listRecords lists every record in s, pending first.
func listRecords(s journal.Store) ([]*Record, error) { return s.(recordLister).Records() }

// onlyRecordIn returns the single record in s.
func onlyRecordIn(tb testing.TB, s journal.Store) *Record {
	tb.Helper()
	recs, err := listRecords(s)
	require.NoError(tb, err)
	require.Len(tb, recs, 1)
	return recs[0]
}

// countingBody is a request body that counts its Close calls.
type countingBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *countingBody) Close() error {
	b.closes.Add(1)
	return nil
}

// bolt is the Transport's journal as the bbolt boltjournal.Journal it is in tests that
// built it with boltTransport, testTransport or testJournal.
func (t *Transport) bolt() *boltjournal.Journal { return t.journal.(*boltjournal.Journal) }
