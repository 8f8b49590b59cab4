// Tests for record.go, the journaled call's steps up to its record: Prepare;
// the write-ahead (a record exists only once its insert returned, S22) and its
// failures on a full or read-only file system (S21); operation IDs (one ID,
// one key, one record, across calls, concurrent calls and KeyTTL; S18 hold,
// 409, replay); and the cost of one write-ahead commit.

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// Prepare builds the record RoundTrip would write, and writes and sends
// nothing.
func TestPrepare(t *testing.T) {
	tr, _ := testTransport(t, &Options{SensitiveQueryParams: []string{"token"}})
	ctx := WithOperationID(context.Background(), "order-7/charge")
	body := &countingBody{Reader: strings.NewReader(`{"amount":700}`)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.test/payments?token=s3cret&x=1", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Content-Type", "application/json")
	rec, err := tr.Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	if rec.OperationID != "order-7/charge" || rec.Key == "" || rec.CallerKey || rec.State != StatePending {
		t.Fatalf("Prepare: operation %q key %q caller key %v state %v", rec.OperationID, rec.Key, rec.CallerKey, rec.State)
	}
	if string(rec.Body) != `{"amount":700}` || rec.BodySHA256 != journal.BodySum(rec.Body) {
		t.Fatalf("Prepare: body %q, sum %s", rec.Body, rec.BodySHA256)
	}
	if rec.Header.Get("Authorization") != "" || strings.Contains(rec.URL, "s3cret") || rec.CredentialTag == "" {
		t.Fatalf("Prepare kept a secret or lost the credential tag: header %v, URL %s, tag %q", rec.Header, rec.URL, rec.CredentialTag)
	}
	if n := body.closes.Load(); n != 1 {
		t.Fatalf("the body was closed %d times, want once", n)
	}
	if n, err := tr.journal.PendingCount(context.Background()); err != nil || n != 0 {
		t.Fatalf("Prepare wrote %d records (%v), want none", n, err)
	}

	// A caller's key is kept, and marked as the caller's.
	req, _ = http.NewRequest(http.MethodPost, "https://api.example.test/payments", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "caller-key-1")
	if rec, err = tr.Prepare(req); err != nil || rec.Key != "caller-key-1" || !rec.CallerKey {
		t.Fatalf("Prepare with a caller's key: %+v, %v", rec, err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	tr, _ := testTransport(t, &Options{MaxBodyBytes: 4})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		body string
		key  string
		want error
	}{
		{"without journal", WithoutJournal(context.Background()), "{}", "", ErrInvalidRequest},
		{"body over the cap", context.Background(), "12345", "", ErrBodyTooLarge},
		{"bad key", context.Background(), "{}", "a\x01b", ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{Reader: strings.NewReader(tc.body)}
			req, err := http.NewRequestWithContext(tc.ctx, http.MethodPost, "https://api.example.test/p", body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.key != "" {
				req.Header["Idempotency-Key"] = []string{tc.key}
			}
			if _, err := tr.Prepare(req); !errors.Is(err, tc.want) {
				t.Fatalf("Prepare: %v, want %v", err, tc.want)
			}
			if n := body.closes.Load(); n != 1 {
				t.Fatalf("the body was closed %d times, want once", n)
			}
		})
	}
	if _, err := tr.Prepare(nil); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("Prepare(nil): %v", err)
	}
}

// A record keeps a Host only when it overrides the URL's: http.NewRequest
// sets Host to the URL's own, which is no override and takes no room.
func TestPrepareKeepsOnlyHostOverride(t *testing.T) {
	tr, _ := testTransport(t, nil)
	for _, tc := range []struct{ host, want string }{
		{"", ""},
		{"api.example.test", ""},
		{"payments.example", "payments.example"},
	} {
		req, err := http.NewRequest(http.MethodPost, "https://api.example.test/payments", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		rec, err := tr.Prepare(req)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Host != tc.want || rec.TargetHost() != tc.want {
			t.Errorf("Host %q: record keeps %q (target host %q), want %q", tc.host, rec.Host, rec.TargetHost(), tc.want)
		}
	}
}

func TestS22_RecordExistsOnlyAfterInsertReturned(t *testing.T) {
	t.Parallel()
	rec := func(key, op string) *Record {
		return &Record{Key: key, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/payments",
			State: StatePending, Created: time.Now(), Updated: time.Now()}
	}

	t.Run("a failed insert leaves nothing behind", func(t *testing.T) {
		j, _ := testJournal(t)
		a := rec("key-a", "op-1")
		require.NoError(t, insertRec(j, a, true))
		require.NotZero(t, seqOf(a))

		failed := []*Record{
			rec("key-b", "op-1"), // operation ID taken
			rec("key-a", "op-2"), // key taken
			rec(strings.Repeat("k", bboltMaxKeySize+1), "op-3"), // bbolt refuses the index key
		}
		for _, f := range failed {
			err := insertRec(j, f, true)
			require.Error(t, err)
			require.Zero(t, seqOf(f), "no trace of a rolled-back insert on the caller's record")
		}
		require.ErrorIs(t, insertRec(j, rec("key-b", "op-1"), true), journal.ErrNameTaken)
		for _, probe := range []journal.Name{{Key: "key-b"}, {OperationID: "op-2"}, {OperationID: "op-3"}} {
			got, err := j.Get(context.Background(), probe)
			require.NoError(t, err)
			require.Nil(t, got, "index entry %q", probe)
		}
		recs, err := j.Records()
		require.NoError(t, err)
		require.Len(t, recs, 1)

		// The failed inserts used neither the index nor a sequence number.
		e := rec("key-b", "op-2")
		require.NoError(t, insertRec(j, e, true))
		require.Equal(t, seqOf(a)+1, seqOf(e))
		got, err := j.Lookup("op-2")
		require.NoError(t, err)
		require.Equal(t, "key-b", got.Key)
	})

	t.Run("concurrent inserts", func(t *testing.T) {
		j, _ := testJournal(t)
		const goroutines, each = 32, 8
		var wg sync.WaitGroup
		ids := make([][]uint64, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					r := rec(fmt.Sprintf("key-%d-%d", g, i), fmt.Sprintf("op-%d-%d", g, i))
					if err := insertRec(j, r, true); err != nil {
						t.Error(err)
						return
					}
					ids[g] = append(ids[g], seqOf(r))
				}
			})
		}
		wg.Wait()
		seen := make(map[uint64]bool)
		for g := range goroutines {
			require.Len(t, ids[g], each)
			for i, id := range ids[g] {
				require.False(t, seen[id], "ID %d given twice", id)
				seen[id] = true
				got, err := j.Lookup(fmt.Sprintf("op-%d-%d", g, i))
				require.NoError(t, err)
				require.Equal(t, id, seqOf(got))
				require.Equal(t, fmt.Sprintf("key-%d-%d", g, i), got.Key)
			}
		}
		recs, err := j.Records()
		require.NoError(t, err)
		require.Len(t, recs, goroutines*each)
	})

	t.Run("every attempt finds its record committed", func(t *testing.T) {
		srv, wire := startPayments(t, nil), newWireLog(t)
		j, _ := testJournal(t)
		var checked atomic.Int32
		wire.intercept = func(r *http.Request, key string) (*http.Response, error) {
			got, err := recordByKey(j, key)
			switch {
			case err != nil:
				t.Errorf("attempt with key %s: %v", key, err)
			case got == nil || got.State != StatePending:
				t.Errorf("attempt with key %s sent before its pending record was committed: %+v", key, got)
			default:
				checked.Add(1)
			}
			return nil, nil
		}
		tr, _ := transportOn(t, j, Options{}, wire, time.Time{})
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				req, _ := paymentRequest(t, context.Background(), srv.URL, fmt.Sprintf("order-s22-%d", i), 100+i)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		require.EqualValues(t, 20, checked.Load())
		require.Equal(t, 20, srv.Ledger().Payments())
	})
}

// bboltMaxKeySize is bbolt's MaxKeySize, the longest key it stores: a part of its
// file format, so it is not expected to change.
const bboltMaxKeySize = 32768

// recordByKey scans the journal for the record with key: keys idem mints are
// not indexed.
func recordByKey(j *boltjournal.Journal, key string) (*Record, error) {
	recs, err := j.Records()
	for _, r := range recs {
		if r.Key == key {
			return r, err
		}
	}
	return nil, err
}

// fillFileSystem writes a file in dir until the file system is full, and
// returns its path.
func fillFileSystem(tb testing.TB, dir string) string {
	tb.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(tb, err)
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xA5}, 4096)
	for range 1 << 16 { // bounded: 256 MiB, far more than the test's tmpfs
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	require.ErrorIs(tb, err, syscall.ENOSPC, "the file system should be full")
	return path
}

// bigPayment is POST /payments with a body of about 64 KiB (testserver
// ignores the extra field): more than the free pages a journal keeps, so its
// write-ahead needs new ones from the file system. (A small one may fit in
// pages the journal already has, full disk or not.)
func bigPayment(tb testing.TB, ctx context.Context, base, ref string) (*http.Request, *countingBody) {
	tb.Helper()
	pad := strings.Repeat("x", 64<<10)
	body := &countingBody{Reader: strings.NewReader(fmt.Sprintf(`{"amount":1,"currency":"eur","reference":%q,"pad":%q}`, ref, pad))}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/payments", body)
	require.NoError(tb, err)
	req.Header.Set("Content-Type", "application/json")
	return req, body
}

func TestWriteAheadFailureDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := mountTmpfs(t, dir, 1<<20); err != nil {
		// Fallback: the child of S21 whose journal file may not grow.
		t.Logf("variant: injected (RLIMIT_FSIZE child, EFBIG), because no tmpfs: %v", err)
		srv := startPayments(t, nil)
		report, out := runHelper(t, "fsize-post", envJournal+"="+filepath.Join(dir, "full.journal"),
			envURL+"="+srv.URL, envRef+"=order-full")
		if report["unsupported"] == "true" {
			t.Skip("no RLIMIT_FSIZE on this system either")
		}
		require.Equal(t, "false", report["response"], out)
		require.Contains(t, report["err"], "write-ahead", out)
		require.Equal(t, 0, srv.Ledger().Requests, "the server saw nothing")
		return
	}
	t.Log("variant: real (a 1 MiB tmpfs filled up: ENOSPC)")
	srv, wire := startPayments(t, nil), newWireLog(t)
	path := filepath.Join(dir, "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() }) // before the unmount
	tr, _ := transportOn(t, j, Options{MaxAttempts: 1}, wire, time.Time{})
	filler := fillFileSystem(t, dir)

	// One call, then several at once (their write-aheads share commits).
	req, body := bigPayment(t, WithOperationID(context.Background(), "order-full/charge"), srv.URL, "order-full")
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Contains(t, err.Error(), "write-ahead failed, request not sent")
	require.EqualValues(t, 1, body.closes.Load())
	var wg sync.WaitGroup
	reqs := make([]*http.Request, 8)
	resps, errs := make([]*http.Response, len(reqs)), make([]error, len(reqs))
	for i := range reqs {
		reqs[i], _ = bigPayment(t, context.Background(), srv.URL, fmt.Sprintf("order-full-%d", i))
		wg.Go(func() { resps[i], errs[i] = tr.RoundTrip(reqs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		require.Nil(t, resps[i], "call %d", i)
		require.ErrorIs(t, err, syscall.ENOSPC, "call %d", i)
	}
	require.Empty(t, wire.sent(), "nothing sent")
	require.Equal(t, 0, srv.Ledger().Requests, "the server saw nothing")

	// Space again: the same journal takes the operation (the failed commits
	// left no trace of it) and it goes out once.
	require.NoError(t, os.Remove(filler))
	req, _ = bigPayment(t, WithOperationID(context.Background(), "order-full/charge"), srv.URL, "order-full")
	resp, err = tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, srv.Ledger().Check([]string{"order-full"}))
	j = reopen(t, j)
	rec := onlyRecordOf(t, j)
	require.Equal(t, "order-full/charge", rec.OperationID)
	require.NoError(t, j.Close())
}

func TestWriteAheadFailureReadOnlyFileSystem(t *testing.T) {
	dir := t.TempDir()
	if err := mountTmpfs(t, dir, 1<<20); err != nil {
		// An injected read-only journal is S21's "journal opened read-only".
		t.Skipf("variant: none here (no tmpfs: %v); TestS21_WriteAheadFailureSendsNothing covers a read-only journal", err)
	}
	srv, wire := startPayments(t, nil), newWireLog(t)
	path := filepath.Join(dir, "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)

	// Linux refuses to make a file system read-only while a file on it is
	// open for writing (EBUSY), so a writer never meets EROFS mid-way. If
	// this kernel allows it, the write-ahead must fail.
	if err := remountReadOnly(dir); err == nil {
		t.Log("variant: real (tmpfs remounted read-only under an open journal)")
		tr, _ := transportOn(t, j, Options{MaxAttempts: 1}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-ro", 1)
		resp, err := tr.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorContains(t, err, "write-ahead failed, request not sent")
		require.Empty(t, wire.sent())
		require.Equal(t, 0, srv.Ledger().Requests, "the server saw nothing")
		j.Close()
		return
	} else {
		require.ErrorIs(t, err, syscall.EBUSY)
		t.Logf("variant: real (tmpfs remounted read-only once the journal is closed; with it open for writing the remount fails: %v)", err)
	}
	require.NoError(t, j.Close())
	require.NoError(t, remountReadOnly(dir))

	// A writer cannot open it: the file system's error, naming the path.
	start := time.Now()
	_, err = boltjournal.Open(path, nil)
	require.ErrorIs(t, err, syscall.EROFS)
	require.Contains(t, err.Error(), path)
	require.False(t, errors.Is(err, journal.ErrCorrupt) || errors.Is(err, journal.ErrLocked), "%v", err)
	require.Less(t, time.Since(start), boltjournal.DefaultOpenTimeout)

	// A reader can (idem journal ls), and a Transport over it sends nothing.
	ro, err := boltjournal.OpenReadOnly(path, 0)
	require.NoError(t, err)
	t.Cleanup(func() { ro.Close() })
	tr, _ := transportOn(t, ro, Options{MaxAttempts: 1}, wire, time.Time{})
	req, body := paymentRequest(t, context.Background(), srv.URL, "order-ro", 1)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorContains(t, err, "write-ahead failed, request not sent")
	require.EqualValues(t, 1, body.closes.Load())
	require.Empty(t, wire.sent())
	require.Equal(t, 0, srv.Ledger().Requests, "the server saw nothing")
}

func TestS21_WriteAheadFailureSendsNothing(t *testing.T) {
	t.Parallel()
	// send makes one journaled POST through tr and checks that it failed with
	// want before anything reached the server.
	send := func(t *testing.T, tr *Transport, srv *testserver.Server, wire *wireLog, ctx context.Context, want error) error {
		t.Helper()
		req, body := paymentRequest(t, ctx, srv.URL, "order-s21", 2100)
		resp, err := tr.RoundTrip(req)
		require.Nil(t, resp)
		require.Error(t, err)
		if want != nil {
			require.ErrorIs(t, err, want)
		}
		require.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed once")
		require.Empty(t, wire.sent(), "nothing sent")
		require.Equal(t, 0, srv.Ledger().Requests, "the server saw nothing")
		return err
	}

	t.Run("journal closed underneath", func(t *testing.T) {
		srv, wire := startPayments(t, nil), newWireLog(t)
		j, _ := testJournal(t)
		tr, _ := transportOn(t, j, Options{}, wire, time.Time{})
		require.NoError(t, j.Close())
		send(t, tr, srv, wire, context.Background(), journal.ErrClosed)
		send(t, tr, srv, wire, WithOperationID(context.Background(), "op-s21"), journal.ErrClosed)
	})

	t.Run("journal opened read-only", func(t *testing.T) {
		srv, wire := startPayments(t, nil), newWireLog(t)
		j, path := testJournal(t)
		require.NoError(t, j.Close())
		ro, err := boltjournal.OpenReadOnly(path, 0)
		require.NoError(t, err)
		t.Cleanup(func() { ro.Close() })
		tr, _ := transportOn(t, ro, Options{}, wire, time.Time{})
		err = send(t, tr, srv, wire, context.Background(), nil)
		require.Contains(t, err.Error(), "write-ahead")
		recs, err := ro.Records()
		require.NoError(t, err)
		require.Empty(t, recs)
	})

	t.Run("insert refused by the index", func(t *testing.T) {
		// The caller's key already belongs to another operation: the insert
		// fails inside the write-ahead transaction.
		srv, wire := startPayments(t, nil), newWireLog(t)
		j, _ := testJournal(t)
		require.NoError(t, insertRec(j, &Record{Key: "taken-key", OperationID: "op-a", Method: http.MethodPost,
			URL: srv.URL + "/payments", State: StateSettled, Created: time.Now(), Updated: time.Now()}, true))
		tr, _ := transportOn(t, j, Options{}, wire, time.Time{})
		ctx := WithKey(WithOperationID(context.Background(), "op-b"), "taken-key")
		err := send(t, tr, srv, wire, ctx, ErrKeyReuse)
		require.Contains(t, err.Error(), "write-ahead")
		got, err := j.Lookup("op-b")
		require.NoError(t, err)
		require.Nil(t, got)
	})

	t.Run("file system refuses to grow the file", func(t *testing.T) {
		// A child process whose journal file may not grow (RLIMIT_FSIZE), as
		// on a full disk: the commit fails, so the request must not go out.
		srv := startPayments(t, nil)
		path := filepath.Join(t.TempDir(), "full.journal")
		report, out := runHelper(t, "fsize-post", envJournal+"="+path, envURL+"="+srv.URL, envRef+"=order-s21")
		if report["unsupported"] == "true" {
			t.Skip("no RLIMIT_FSIZE on this system")
		}
		require.Equal(t, "false", report["response"], out)
		require.Contains(t, report["err"], "write-ahead", out)
		require.Equal(t, 0, srv.Ledger().Requests, "the server saw nothing")

		// The failed commit left the journal intact and without the record.
		j, err := boltjournal.Open(path, nil)
		require.NoError(t, err)
		defer j.Close()
		recs, err := j.Records()
		require.NoError(t, err)
		require.Empty(t, recs)
	})
}

func TestWithOperationIDSequentialCallsReplay(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-4827/charge")

	var bodies []string
	for i, replayed := range []string{"", "true"} {
		req, _ := paymentRequest(t, ctx, srv.URL, "order-4827", 1250)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err, "call %d", i+1)
		bodies = append(bodies, string(drain(t, resp)))
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Equal(t, replayed, resp.Header.Get("Idempotent-Replayed"), "call %d", i+1)
	}
	require.Equal(t, bodies[0], bodies[1], "the second call gets the stored payment")

	rec := onlyRecordIn(t, j)
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, "order-4827/charge", rec.OperationID)
	require.Len(t, wire.sent(), 2)
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, 1, srv.Ledger().Effects["order-4827"])
}

func TestWithOperationIDConcurrentCallsCollapse(t *testing.T) {
	t.Parallel()
	srv, wire := startPayments(t, nil), newWireLog(t)
	// The first request to arrive is answered late, so the others are sure to
	// be waiting while it runs.
	srv.Script(testserver.Fault{Kind: testserver.FaultSlowResponse, Delay: 50 * time.Millisecond})
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-77/charge")

	const calls = 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	replays := make(chan string, calls)
	for range calls {
		wg.Go(func() {
			<-start
			req, _ := paymentRequest(t, ctx, srv.URL, "order-77", 4200)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("status %d", resp.StatusCode)
			}
			replays <- resp.Header.Get("Idempotent-Replayed")
		})
	}
	close(start)
	wg.Wait()
	close(replays)
	var first, replayed int
	for r := range replays {
		if r == "true" {
			replayed++
		} else {
			first++
		}
	}
	require.Equal(t, 1, first, "one call ran the operation")
	require.Equal(t, calls-1, replayed, "the others got its stored result")

	rec := onlyRecordIn(t, j)
	require.Equal(t, StateSettled, rec.State)
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, 1, srv.Ledger().Effects["order-77"])
}

func TestWithOperationIDSettledPastKeyTTL(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	j := memStore(t)
	tr, clk := transportOver(t, j, Options{KeyTTL: time.Hour}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-9/charge")

	req, _ := paymentRequest(t, ctx, srv.URL, "order-9", 900)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	rec := onlyRecordIn(t, j)

	// The server may have forgotten the key by now: a resend could pay twice.
	clk.Advance(time.Hour + time.Minute)
	req, body := paymentRequest(t, ctx, srv.URL, "order-9", 900)
	resp, err = tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrAlreadySettled)
	var settled *AlreadySettledError
	require.ErrorAs(t, err, &settled)
	require.Equal(t, "order-9/charge", settled.OperationID)
	require.Equal(t, rec.Key, settled.Key)
	require.Equal(t, http.StatusCreated, settled.Status)
	require.EqualValues(t, 1, body.closes.Load())

	require.Len(t, wire.sent(), 1, "nothing sent")
	require.Equal(t, 1, srv.Ledger().Requests)
	require.Equal(t, StateSettled, onlyRecordIn(t, j).State)
}

func TestWithOperationIDPendingPastKeyTTL(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	srv.Script(status503, status503)
	j, _ := testJournal(t)
	tr, clk := transportOn(t, j, Options{KeyTTL: time.Hour, MaxAttempts: 2}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-10/charge")

	req, _ := paymentRequest(t, ctx, srv.URL, "order-10", 1000)
	_, err := tr.RoundTrip(req)
	perr := pendingErr(t, err)

	clk.Advance(time.Hour + time.Minute)
	var outs []Outcome
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 1)
	require.Nil(t, outs[0].Response)
	require.ErrorIs(t, outs[0].Err, ErrKeyExpired)
	require.Equal(t, perr.Key, outs[0].Record.Key)
	require.Equal(t, StateExpired, outs[0].Record.State)

	rec, err := j.Lookup("order-10/charge")
	require.NoError(t, err)
	require.Equal(t, StateExpired, rec.State)
	require.Len(t, wire.sent(), 2, "nothing sent once expired")
	require.Equal(t, 2, srv.Ledger().Requests)

	// Not resumed again, and a new call under the same ID is refused too.
	outs = nil
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) { outs = append(outs, o) }))
	require.Empty(t, outs)
	req, body := paymentRequest(t, ctx, srv.URL, "order-10", 1000)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrKeyExpired)
	require.False(t, errors.Is(err, ErrAlreadySettled))
	require.EqualValues(t, 1, body.closes.Load())
	require.Len(t, wire.sent(), 2)
}

func TestWithOperationIDDifferentRequestRefused(t *testing.T) {
	srv, wire := startPayments(t, nil), newWireLog(t)
	j := memStore(t)
	tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
	ctx := WithOperationID(context.Background(), "order-11/charge")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-11", 1100)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)

	other := map[string]func() *http.Request{
		"another amount": func() *http.Request { r, _ := paymentRequest(t, ctx, srv.URL, "order-11", 1101); return r },
		"another URL": func() *http.Request {
			r, _ := paymentRequest(t, ctx, srv.URL+"/v2", "order-11", 1100)
			return r
		},
		"another method": func() *http.Request {
			r, _ := paymentRequest(t, ctx, srv.URL, "order-11", 1100)
			r.Method = http.MethodPatch
			return r
		},
		"another caller key": func() *http.Request {
			r, _ := paymentRequest(t, ctx, srv.URL, "order-11", 1100)
			r.Header.Set("Idempotency-Key", "not-the-journaled-one")
			return r
		},
	}
	for name, build := range other {
		resp, err := tr.RoundTrip(build())
		require.Nil(t, resp, name)
		require.ErrorIs(t, err, ErrKeyReuse, name)
	}
	require.Len(t, wire.sent(), 1)
	require.Equal(t, 1, srv.Ledger().Requests)
}

func TestS18_HoldThen409ThenReplay(t *testing.T) {
	t.Parallel()
	srv := startPayments(t, nil)
	// The hold lasts until the test releases it.
	srv.Script(testserver.Fault{Kind: testserver.FaultHold, Delay: time.Minute})
	wire := newWireLog(t)
	j, _ := testJournal(t)
	// The first attempt is held until its timeout, so it ends at 1.5 s; every
	// other attempt has the same 1.5 s to reach the server, however loaded
	// the machine.
	tr, clk := transportOn(t, j, Options{AttemptTimeout: 1500 * time.Millisecond, MaxAttempts: 40,
		InitialInterval: 100 * time.Millisecond}, wire, time.Time{})
	// Waits are the fake clock's and take no real time. Once a retry has met
	// 409, the test ends the hold and lets the held request finish its
	// payment before the next attempt, which then gets the stored result.
	var release sync.Once
	clk.onSleep = func(time.Duration) {
		if srv.Ledger().InProgress == 0 {
			return
		}
		release.Do(func() {
			srv.ReleaseHolds()
			eventually(t, 10*time.Second, func() bool { return srv.Ledger().Effects["order-s18"] == 1 },
				"the held request made its payment")
		})
	}

	ctx := WithOperationID(context.Background(), "charge/order-s18")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-s18", 1250)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	stored := drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), "the retry got the stored result")
	require.GreaterOrEqual(t, time.Since(start), 1200*time.Millisecond, "the result exists only once the hold ends")

	l := srv.Ledger()
	require.Equal(t, 1, l.Effects["order-s18"])
	require.GreaterOrEqual(t, l.InProgress, 1, "a retry met 409")
	require.GreaterOrEqual(t, l.Replays, 1)
	rec, err := j.Lookup("charge/order-s18")
	require.NoError(t, err)
	require.Equal(t, StateSettled, rec.State)
	require.GreaterOrEqual(t, rec.Attempts, 3)
	require.Equal(t, l.Requests, len(wire.sent()))
	wire.requireOneKey(t, rec.Key)
	require.Contains(t, string(stored), `"reference":"order-s18"`)

	// After a restart the app rebuilds the request with another amount under
	// the same operation ID: refused before anything is sent.
	j2 := reopen(t, j)
	tr2, _ := transportOn(t, j2, Options{}, wire, clk.Now())
	req2, body2 := paymentRequest(t, ctx, srv.URL, "order-s18", 9999)
	resp2, err := tr2.RoundTrip(req2)
	require.Nil(t, resp2)
	require.ErrorIs(t, err, ErrKeyReuse)
	require.EqualValues(t, 1, body2.closes.Load())
	require.Equal(t, l.Requests, srv.Ledger().Requests, "the server saw nothing new")
	require.Len(t, wire.sent(), l.Requests)
	after, err := j2.Lookup("charge/order-s18")
	require.NoError(t, err)
	require.Equal(t, rec.Key, after.Key)
	require.Equal(t, rec.BodySHA256, after.BodySHA256)
	require.Equal(t, StateSettled, after.State)
}

func TestRecallBeforeNextAttemptSendsNothing(t *testing.T) {
	t.Parallel()
	// 429 with a Retry-After past MaxRetryAfter: the server asked for an
	// hour, so a re-call within it is pending at once.
	tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			reply(w, http.StatusTooManyRequests, "Retry-After", "3600")
			return
		}
		reply(w, http.StatusCreated)
	})
	ctx := WithOperationID(context.Background(), "op-r14")
	call := func() (*http.Response, error) {
		return tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r14", 1400)).WithContext(ctx))
	}

	_, err := call()
	first := pendingErr(t, err)
	require.Equal(t, clk.Now().Add(time.Hour), first.NextAttempt)

	clk.Advance(30 * time.Minute)
	resp, err := call()
	require.Nil(t, resp)
	again := pendingErr(t, err)
	require.Equal(t, first.NextAttempt, again.NextAttempt)
	require.Equal(t, first.Key, again.Key)
	require.Equal(t, 1, srv.count(), "nothing sent before the server's time")

	clk.Advance(30*time.Minute + time.Second)
	resp, err = call()
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, 2, srv.count())
}

// helperFsizePost opens the journal, then forbids the file to grow
// (RLIMIT_FSIZE at its current size, as a full disk would) and sends a payment
// whose body needs new pages. It reports what RoundTrip returned and exits 0
// if that was an error and no response.
func helperFsizePost() int {
	path := os.Getenv(envJournal)
	j, err := boltjournal.Open(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer j.Close()
	tr, err := NewTransport(j, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fi, err := os.Stat(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if err := limitFileSize(fi.Size()); errors.Is(err, errors.ErrUnsupported) {
		fmt.Println("unsupported=true")
		return 0
	} else if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	pad := strings.Repeat("x", 2<<20) // more than the room the file has: the journal grows it 1 MiB at a time
	body := fmt.Sprintf(`{"amount":1,"currency":"eur","reference":%q,"pad":%q}`, os.Getenv(envRef), pad)
	req, err := http.NewRequest(http.MethodPost, os.Getenv(envURL)+"/payments", strings.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	resp, err := tr.RoundTrip(req)
	fmt.Printf("response=%v\nerr=%v\n", resp != nil, err)
	if resp != nil {
		resp.Body.Close()
		return 4
	}
	if err == nil {
		return 4
	}
	return 0
}

// BenchmarkWriteAhead measures one fsynced write-ahead commit per operation,
// alone and with many writers sharing group commits. It reports commits/op.
func BenchmarkWriteAhead(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			j, _ := testJournal(b)
			body := make([]byte, 200)
			var n atomic.Int64
			before := j.Stats()
			insert := func() bool {
				rec := &Record{Key: fmt.Sprintf("key-%d", n.Add(1)), Method: http.MethodPost,
					URL: "http://127.0.0.1/payments", Body: body, State: StatePending}
				err := insertRec(j, rec, true)
				if err != nil {
					b.Error(err)
				}
				return err == nil
			}
			b.ReportAllocs()
			b.ResetTimer()
			if writers == 1 {
				for i := 0; i < b.N && insert(); i++ {
				}
			} else {
				// RunParallel starts parallelism x GOMAXPROCS goroutines.
				b.SetParallelism(max(writers/runtime.GOMAXPROCS(0), 1))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() && insert() {
					}
				})
			}
			b.StopTimer()
			after := j.Stats()
			b.ReportMetric(float64(after.Commits-before.Commits)/float64(after.WriteAheads-before.WriteAheads), "commits/op")
		})
	}
}
