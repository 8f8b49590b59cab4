// Tests for the request body (body.go): read once, at most MaxBodyBytes for a
// journaled request, closed exactly once on every path; every attempt replays
// the byte-identical body with a matching Content-Length, a reused
// *http.Request still sends it, no cap truncates it (S06, S07); and the
// memory one large journaled body costs (BenchmarkLargeBody).

package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/idem-go/idem/internal/memtest"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/journal"
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

func TestS06_RetryCarriesIdenticalBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		newReq func(t *testing.T, url string) (*http.Request, *countingBody)
	}{
		{"POST from http.NewRequest", http.MethodPost, func(t *testing.T, url string) (*http.Request, *countingBody) {
			return newRequest(t, http.MethodPost, url, payload), nil
		}},
		{"POST with a bare body of unknown length", http.MethodPost, func(t *testing.T, url string) (*http.Request, *countingBody) {
			body := &countingBody{Reader: strings.NewReader(payload)}
			req, err := http.NewRequest(http.MethodPost, url, body)
			require.NoError(t, err)
			require.Nil(t, req.GetBody)
			require.Zero(t, req.ContentLength)
			return req, body
		}},
		{"unjournaled PUT", http.MethodPut, func(t *testing.T, url string) (*http.Request, *countingBody) {
			body := &countingBody{Reader: strings.NewReader(payload)}
			req, err := http.NewRequest(http.MethodPut, url, body)
			require.NoError(t, err)
			req.ContentLength = int64(len(payload))
			return req, body
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					reply(w, http.StatusInternalServerError)
					return
				}
				reply(w, http.StatusCreated)
			})
			req, counted := tt.newReq(t, srv.URL)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			drain(t, resp)

			reqs := srv.requests()
			require.Len(t, reqs, 2)
			require.Len(t, clk.Sleeps(), 1)
			for i, r := range reqs {
				require.Equal(t, tt.method, r.Method)
				sameBytes(t, []byte(payload), r.Body, "attempt %d body", i+1)
				require.Equal(t, int64(len(payload)), r.ContentLength, "attempt %d Content-Length", i+1)
			}
			if tt.method == http.MethodPost {
				sameKey(t, reqs)
			}
			if counted != nil {
				require.Equal(t, int32(1), counted.closes.Load(), "the caller's body is closed exactly once")
			}
		})
	}
}

func TestS07_ReusedRequest(t *testing.T) {
	t.Parallel()
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			// Each call meets 503 once, so each call makes two attempts.
			tr, _, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
				if n%2 == 1 {
					reply(w, http.StatusServiceUnavailable)
					return
				}
				reply(w, http.StatusCreated)
			})
			client := &http.Client{Transport: tr}
			req := newRequest(t, method, srv.URL, payload)
			require.NotNil(t, req.GetBody)

			const calls = 3
			for i := 1; i <= calls; i++ {
				resp, err := client.Do(req)
				require.NoError(t, err, "call %d", i)
				require.Equal(t, http.StatusCreated, resp.StatusCode, "call %d", i)
				drain(t, resp)
			}

			reqs := srv.requests()
			require.Len(t, reqs, 2*calls)
			for i, r := range reqs {
				sameBytes(t, []byte(payload), r.Body, "call %d attempt %d body", i/2+1, i%2+1)
				require.Equal(t, int64(len(payload)), r.ContentLength, "call %d attempt %d", i/2+1, i%2+1)
			}
		})
	}

	// A reused request with no way to rebuild its body must not be sent with a
	// silently shortened one.
	t.Run("spent body without GetBody", func(t *testing.T) {
		tr, _, srv := newScenario(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusCreated)
		})
		req := newRequest(t, http.MethodPost, srv.URL, payload)
		req.GetBody = nil
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(t, resp)

		resp, err = tr.RoundTrip(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrInvalidRequest)
		require.Equal(t, 1, srv.count(), "nothing sent for the second call")
	})
}

func TestMaxBodyBytesMaxInt64SendsWholeBody(t *testing.T) {
	t.Parallel()
	want := bytes.Repeat([]byte(paymentBody("order-r9", 900)), 1000)
	sum := sha256.Sum256(want)
	tests := []struct {
		name string
		req  func(url string) *http.Request
	}{
		{"unknown length", func(url string) *http.Request {
			req := newRequest(t, http.MethodPost, url, "")
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(want)), -1
			return req
		}},
		{"reader http.NewRequest cannot measure", func(url string) *http.Request {
			req, err := http.NewRequest(http.MethodPost, url, struct{ io.Reader }{bytes.NewReader(want)})
			require.NoError(t, err)
			return req
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _, srv := newScenario(t, &Options{MaxBodyBytes: math.MaxInt64}, created)
			resp, err := tr.RoundTrip(tt.req(srv.URL + "/payments"))
			require.NoError(t, err)
			drain(t, resp)
			seen := srv.requests()
			require.Len(t, seen, 1)
			sameBytes(t, want, seen[0].Body)
			require.Equal(t, hex.EncodeToString(sum[:]), onlyRecord(t, tr).BodySHA256)
		})
	}
}

// An attempt's body is one net/http knows to be in memory, as a caller's
// bytes.Reader is: the request leaves in as many writes as plain net/http
// makes for it (one), not with its headers flushed first.
func TestAttemptWritesLikePlainNetHTTP(t *testing.T) {
	t.Parallel()
	srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
	body := strings.Repeat("x", 1024)
	writes := func(send func(base http.RoundTripper, req *http.Request) (*http.Response, error)) int64 {
		var n atomic.Int64
		base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &writeCounter{Conn: c, n: &n}, nil
		}}
		defer base.CloseIdleConnections()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := send(base, req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return n.Load()
	}
	plain := writes(func(base http.RoundTripper, req *http.Request) (*http.Response, error) { return base.RoundTrip(req) })
	journaled := writes(func(base http.RoundTripper, req *http.Request) (*http.Response, error) {
		tr, _ := memTransport(t, &Options{Base: base})
		return tr.RoundTrip(req)
	})
	require.Equal(t, int64(1), plain, "plain net/http writes this request at once")
	require.Equal(t, plain, journaled, "idem's attempt takes as many writes as plain net/http")
}

// writeCounter counts the writes to a connection.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// BenchmarkLargeBody measures the memory of one journaled 8 MiB POST, into a
// journal with no other large body pending, with four, and sealed
// (Options.Journal.Encryption): "peak-x-body" is the most it adds to the heap over
// the body's size (the target is <= 2), "x-body" the bytes allocated per
// operation over the body's size. It also shows that a 64 MiB body over the
// cap fails with ErrBodyTooLarge after reading no more than the cap, and
// nothing when its length is announced.
func BenchmarkLargeBody(b *testing.B) {
	const size = 8 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	body := bytes.Repeat([]byte("x"), size)
	for _, pending := range []int{0, 4} {
		b.Run(fmt.Sprintf("journaled=8MiB/pending=%d", pending), func(b *testing.B) {
			largeBody(b, srv, body, pending, nil)
		})
	}
	// With Options.Journal.Encryption the body is sealed whole before it is staged:
	// the ciphertext is a second copy.
	key := bytes.Repeat([]byte{7}, boltjournal.KeySize)
	b.Run("journaled=8MiB/pending=0/sealed", func(b *testing.B) {
		largeBody(b, srv, body, 0, &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": key}})
	})
	for _, announced := range []bool{false, true} {
		b.Run(fmt.Sprintf("over-cap=64MiB/announced=%v", announced), func(b *testing.B) {
			tr, _ := testTransport(b, &Options{Base: srv.Client().Transport})
			big := &countingReader{n: 64 << 20}
			for b.Loop() {
				big.read = 0
				req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(big))
				if announced {
					req.ContentLength = big.n
				}
				if _, err := tr.RoundTrip(req); !errors.Is(err, ErrBodyTooLarge) {
					b.Fatalf("want ErrBodyTooLarge, got %v", err)
				}
			}
			b.ReportMetric(float64(big.read)/(1<<20), "MiB-read")
		})
	}
}

// largeBody measures journaled POSTs of body with pending large records
// already in the journal (stored whole, they used to be rewritten, and
// copied, by every commit that touched their bbolt leaf).
func largeBody(b *testing.B, srv *httptest.Server, body []byte, pending int, kr *boltjournal.Keyring) {
	size := float64(len(body))
	j, err := boltjournal.Open(filepath.Join(b.TempDir(), "idem.journal"), &boltjournal.Options{Encryption: kr})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	for i := range pending {
		rec := &Record{Key: fmt.Sprint("pending-", i), Method: http.MethodPost, URL: srv.URL,
			Body: bytes.Clone(body), State: StatePending}
		if err := insertRec(j, rec, true); err != nil {
			b.Fatal(err)
		}
	}
	tr, err := NewTransport(j, &Options{Base: srv.Client().Transport, Journal: boltjournal.Options{Encryption: kr}})
	if err != nil {
		b.Fatal(err)
	}
	post := func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	// The first large body written to a fresh journal once peaked higher
	// (bbolt remapped the growing file mid-commit, copying every value the
	// transaction held: initialMmapSize): reported apart.
	first := peakDuring(post) / size
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for b.Loop() {
		post()
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/size, "x-body")
	// The peak: heap objects above a collected baseline, sampled every
	// 50 µs during one call, the largest of five calls.
	var peak float64
	for range 5 {
		peak = max(peak, peakDuring(post)/size)
	}
	b.ReportMetric(peak, "peak-x-body")
	b.ReportMetric(first, "first-peak-x-body")
}

// countingReader yields n bytes of 'x' and counts what was read.
type countingReader struct{ n, read int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	if r.read >= r.n {
		return 0, io.EOF
	}
	m := min(int64(len(p)), r.n-r.read)
	for i := range p[:m] {
		p[i] = 'x'
	}
	r.read += m
	return int(m), nil
}

// peakDuring is memtest.PeakDuring.
var peakDuring = memtest.PeakDuring
