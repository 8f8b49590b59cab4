package idem

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
)

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

// BenchmarkSettle measures a deferred state change, which never waits for a commit.
func BenchmarkSettle(b *testing.B) {
	j, _ := testJournal(b)
	rec := &Record{Key: "k", Method: http.MethodPost, URL: "http://127.0.0.1/payments", State: StatePending}
	if err := insertRec(j, rec, true); err != nil {
		b.Fatal(err)
	}
	rec.State = StateSettled
	b.ReportAllocs()
	for b.Loop() {
		if err := saveRec(j, rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClassify(b *testing.B) {
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable}
	err := fmt.Errorf("wrapped: %w", errors.New("connection reset"))
	b.ReportAllocs()
	for b.Loop() {
		DefaultClassifier(Attempt{Response: resp, Keyed: true})
		DefaultClassifier(Attempt{Err: err, Wrote: true, Keyed: true})
	}
}

func BenchmarkBackoff(b *testing.B) {
	cfg, err := (&Options{}).config()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	resp := &http.Response{Header: http.Header{"Retry-After": {"3"}}}
	b.ReportAllocs()
	for b.Loop() {
		s := newSchedule(cfg, realClock{})
		for n := range 6 {
			s.backoff(n + 1)
		}
		s.wait(resp, now, 7)
	}
}

// BenchmarkRoundTripJournaled measures a whole journaled POST through the
// Transport against a loopback server (write-ahead, attempt, settle), from
// one caller and from 64.
func BenchmarkRoundTripJournaled(b *testing.B) {
	benchRoundTrip(b, http.MethodPost, strings.Repeat("x", 200))
}

// BenchmarkRoundTripUnjournaled measures a GET through the Transport, which
// retries it but writes nothing: what idem costs every request that is not
// journaled once it replaces http.DefaultClient.
func BenchmarkRoundTripUnjournaled(b *testing.B) {
	benchRoundTrip(b, http.MethodGet, "")
}

func benchRoundTrip(b *testing.B, method, body string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	base.MaxIdleConnsPerHost = 64
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			j, _ := testJournal(b)
			tr, err := NewTransport(j, &Options{Base: base})
			if err != nil {
				b.Fatal(err)
			}
			send := func() bool {
				var rd io.Reader
				if body != "" {
					rd = strings.NewReader(body)
				}
				req, _ := http.NewRequest(method, srv.URL+"/payments", rd)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return false
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return true
			}
			b.ReportAllocs()
			b.ResetTimer()
			if callers == 1 {
				for i := 0; i < b.N && send(); i++ {
				}
				return
			}
			b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() && send() {
				}
			})
		})
	}
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

// peakDuring runs f after a collection and returns the most heap memory its
// objects took above that baseline, sampled every 50 µs (dead objects not yet
// swept included, so an upper bound of what f kept alive).
func peakDuring(f func()) float64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Microsecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return float64(peak.Load()) - float64(base)
}
