// Tests for the caller's request body: read once, at most MaxBodyBytes for a
// journaled request, and closed exactly once on every path.

package idem

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

func TestBodyTooLargeRefused(t *testing.T) {
	const limit = 64
	for _, tc := range []struct {
		name string
		ctx  context.Context
		size int
	}{
		{"POST one byte over", context.Background(), limit + 1},
		{"POST far over", context.Background(), 10 * limit},
		{"PUT with an operation ID", WithOperationID(context.Background(), "op-big"), limit + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire := newWireLog(t)
			j := memStore(t)
			tr, _ := transportOver(t, j, Options{MaxBodyBytes: limit}, wire, time.Time{})
			body := &countingBody{Reader: bytes.NewReader(bytes.Repeat([]byte("x"), tc.size))}
			method := http.MethodPost
			if strings.HasPrefix(tc.name, "PUT") {
				method = http.MethodPut
			}
			req, err := http.NewRequestWithContext(tc.ctx, method, "http://127.0.0.1:9/payments", body)
			require.NoError(t, err)

			resp, err := tr.RoundTrip(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrBodyTooLarge)
			require.EqualValues(t, 1, body.closes.Load())
			require.Empty(t, wire.sent(), "nothing sent")
			recs, err := j.Records()
			require.NoError(t, err)
			require.Empty(t, recs, "nothing written")
		})
	}

	t.Run("announced over the limit: nothing read", func(t *testing.T) {
		wire := newWireLog(t)
		j := memStore(t)
		tr, _ := transportOver(t, j, Options{MaxBodyBytes: limit}, wire, time.Time{})
		big := &countingReader{n: 64 << 20}
		body := &countingBody{Reader: big}
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/payments", body)
		require.NoError(t, err)
		req.ContentLength = big.n
		resp, err := tr.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrBodyTooLarge)
		require.Zero(t, big.read, "refused on its announced length")
		require.EqualValues(t, 1, body.closes.Load())
		require.Empty(t, wire.sent(), "nothing sent")
	})

	t.Run("exactly at the limit", func(t *testing.T) {
		wire := newWireLog(t)
		wire.intercept = func(r *http.Request, _ string) (*http.Response, error) { return synthetic(r, http.StatusCreated), nil }
		j := memStore(t)
		tr, _ := transportOver(t, j, Options{MaxBodyBytes: limit}, wire, time.Time{})
		body := &countingBody{Reader: bytes.NewReader(bytes.Repeat([]byte("x"), limit))}
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/payments", body)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.EqualValues(t, 1, body.closes.Load())
		require.Len(t, wire.sent()[0].Body, limit)
	})
}

func TestCallerBodyClosedOnce(t *testing.T) {
	t.Parallel()
	certErr := x509.UnknownAuthorityError{}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	closedJournal := func(t *testing.T, j *boltjournal.Journal) { require.NoError(t, j.Close()) }

	tests := []struct {
		name    string
		method  string
		url     string
		ctx     context.Context
		body    func() *countingBody
		answer  func(r *http.Request) (*http.Response, error) // the wire; nil sends nothing
		opts    Options
		prepare func(*testing.T, *boltjournal.Journal)
		wantErr error  // matched with errors.Is
		errText string // or: the error says this
		pending bool
	}{
		{name: "journaled, settled", answer: answerStatus(http.StatusCreated)},
		{name: "journaled, final 422", answer: answerStatus(http.StatusUnprocessableEntity)},
		{name: "journaled, left pending", answer: answerStatus(http.StatusServiceUnavailable), opts: Options{MaxAttempts: 3}, pending: true},
		{name: "journaled, permanent error", answer: answerError(certErr), wantErr: ErrPermanent},
		{name: "journaled, context canceled", ctx: canceled, answer: answerStatus(http.StatusCreated), wantErr: context.Canceled},
		{name: "unjournaled, settled", method: http.MethodPut, answer: answerStatus(http.StatusOK)},
		{name: "unjournaled, retries run out", method: http.MethodPut, answer: answerStatus(http.StatusServiceUnavailable), opts: Options{MaxAttempts: 3}},
		{name: "unjournaled, permanent error", method: http.MethodPut, answer: answerError(certErr), wantErr: ErrPermanent},
		{name: "unjournaled, over the cap, streamed once", method: http.MethodPut, opts: Options{MaxBodyBytes: 8}, answer: answerStatus(http.StatusOK)},
		{name: "invalid URL scheme", url: "ftp://127.0.0.1/payments", wantErr: ErrInvalidRequest},
		{name: "no host", url: "http:///payments", wantErr: ErrInvalidRequest},
		{name: "over the cap with an invalid URL", url: "ftp://127.0.0.1/payments", opts: Options{MaxBodyBytes: 8}, wantErr: ErrInvalidRequest},
		{name: "journal closed", prepare: closedJournal, wantErr: journal.ErrClosed},
		{name: "body read fails", body: func() *countingBody {
			return &countingBody{Reader: iotest.ErrReader(errors.New("disk on fire"))}
		}, errText: "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := newWireLog(t)
			wire.intercept = func(r *http.Request, _ string) (*http.Response, error) {
				if tt.answer == nil {
					t.Error("sent, but nothing should be")
					return synthetic(r, http.StatusTeapot), nil
				}
				return tt.answer(r)
			}
			j, _ := testJournal(t)
			tr, _ := transportOn(t, j, tt.opts, wire, time.Time{})
			if tt.prepare != nil {
				tt.prepare(t, j)
			}
			method, url, ctx := tt.method, tt.url, tt.ctx
			if method == "" {
				method = http.MethodPost
			}
			if url == "" {
				url = "http://127.0.0.1:9/payments"
			}
			if ctx == nil {
				ctx = context.Background()
			}
			body := &countingBody{Reader: strings.NewReader(paymentBody("order-b", 5))}
			if tt.body != nil {
				body = tt.body()
			}
			req, err := http.NewRequestWithContext(ctx, method, url, body)
			require.NoError(t, err)

			resp, err := tr.RoundTrip(req)
			switch {
			case tt.pending:
				pendingErr(t, err)
				require.Nil(t, resp)
			case tt.wantErr != nil:
				require.Nil(t, resp)
				require.ErrorIs(t, err, tt.wantErr)
			case tt.errText != "":
				require.Nil(t, resp)
				require.ErrorContains(t, err, tt.errText)
			default:
				require.NoError(t, err)
				require.NotNil(t, resp)
				resp.Body.Close()
			}
			require.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed exactly once")
		})
	}
}

// answerStatus answers every attempt with code.
func answerStatus(code int) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) { return synthetic(r, code), nil }
}

// answerError fails every attempt with err.
func answerError(err error) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}

// pipeBody is a request body that blocks until its writer writes, and counts
// its Close calls; Close unblocks a pending Read. Each Read first sends on
// reading, if set and it has room.
type pipeBody struct {
	*io.PipeReader
	closes  atomic.Int32
	reading chan struct{}
}

func (b *pipeBody) Read(p []byte) (int, error) {
	select {
	case b.reading <- struct{}{}:
	default:
	}
	return b.PipeReader.Read(p)
}

func (b *pipeBody) Close() error {
	b.closes.Add(1)
	return b.PipeReader.Close()
}

func TestBlockingBodyHonoursDeadline(t *testing.T) {
	t.Parallel()
	tr, clk, srv := newScenario(t, nil, created)
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	body := &pipeBody{PipeReader: pr, reading: make(chan struct{}, 1)}
	// The deadline, 100 ms away, passes once RoundTrip is reading the body
	// (not on a real timer, which could pass before the read begins).
	ctx := newManualDeadline(t, clk.Now().Add(100*time.Millisecond))
	go func() {
		select {
		case <-body.reading:
			ctx.pass()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments", body)
	require.NoError(t, err)

	start := time.Now()
	select {
	case res := <-roundTripAsync(tr, req):
		require.Less(t, time.Since(start), time.Second)
		require.Nil(t, res.resp)
		require.ErrorIs(t, res.err, context.DeadlineExceeded)
		require.False(t, errors.As(res.err, new(*PendingError)), "nothing was written, so nothing is pending")
	case <-time.After(2 * time.Second):
		pw.CloseWithError(errors.New("test gave up")) // let RoundTrip return
		t.Fatal("RoundTrip still reading the body 1.9 s past the context deadline")
	}
	noRequests(t, tr, srv)
	require.EqualValues(t, 1, body.closes.Load())
}

// A body held in memory is read without a goroutine to watch the context:
// reading it cannot block. Any other is read in one, so a cancel can
// abandon it (TestBlockingBodyHonoursDeadline).
func TestInMemoryBody(t *testing.T) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	for _, tc := range []struct {
		name string
		r    io.Reader
		want bool
	}{
		{"bytes.Reader", bytes.NewReader(nil), true},
		{"strings.Reader", strings.NewReader(""), true},
		{"bytes.Buffer", new(bytes.Buffer), true},
		{"NopCloser(bytes.Reader)", io.NopCloser(bytes.NewReader(nil)), true},
		{"NopCloser(strings.Reader)", io.NopCloser(strings.NewReader("")), true},
		{"pipe", pr, false},
		{"NopCloser(pipe)", io.NopCloser(pr), false},
		{"NopCloser(nil)", io.NopCloser(nil), false},
		{"LimitReader(bytes.Reader)", io.LimitReader(bytes.NewReader(nil), 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, inMemory(tc.r))
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	payload := []byte(`{"amount":100}`)
	n := testing.AllocsPerRun(100, func() {
		buf, err := readAll(ctx, io.NopCloser(bytes.NewReader(payload)), 1<<20, int64(len(payload)))
		if err != nil || !bytes.Equal(buf, payload) {
			t.Fatalf("readAll = %q, %v", buf, err)
		}
	})
	// The reader and its NopCloser, and the buffer read into: no channel,
	// closure or goroutine.
	require.LessOrEqual(t, n, 3.0)
}
