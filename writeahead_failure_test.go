// Write-ahead failures on a real file system: a full disk and a read-only
// one. Nothing may be sent when the commit fails, and the caller gets the
// file system's error. As root, on Linux, the test mounts a small tmpfs; as
// anyone else it falls back to the RLIMIT_FSIZE child of S21 (a file that
// may not grow). S21 (TestS21_WriteAheadFailureSendsNothing) also covers a closed
// journal, a read-only handle and a refused insert.

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

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
