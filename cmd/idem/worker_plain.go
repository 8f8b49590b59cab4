// This file holds the demo's plain worker: the payments of worker.go sent the
// way most code sends them today, for the demo to compare against idem. It is
// net/http with a retry loop and a fresh idempotency key on every attempt
// (the server requires one), and a to-do file of payments done, appended to
// after each answer. A retried request the server had already acted on (a
// lost response, an answer after the timeout) charges again; so does a
// payment in flight when the process is killed, since the next life re-sends
// what the file does not show done.

package main

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// plainAttempts is the plain client's attempts per payment, idem's default.
const plainAttempts = 6

func runPlainWorker(url, donePath string, n, conc int, attemptTimeout time.Duration) error {
	done, err := readDone(donePath)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(donePath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	w := &plainWorker{url: url, client: &http.Client{Timeout: attemptTimeout},
		out: newLineWriter(os.Stdout), done: newLineWriter(f)}
	w.out.printf("phase sending")
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(conc, 1) {
		wg.Go(func() {
			for i := range jobs {
				w.send(i)
			}
		})
	}
	for i := range n {
		if !done[reference(i)] {
			jobs <- i
		}
	}
	close(jobs)
	wg.Wait()
	w.out.printf("done")
	return nil
}

// readDone reads the to-do file's done references; a missing file is a first run.
func readDone(path string) (map[string]bool, error) {
	done := map[string]bool{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		done[strings.TrimSpace(sc.Text())] = true
	}
	return done, sc.Err()
}

type plainWorker struct {
	url    string
	client *http.Client
	out    *lineWriter
	done   *lineWriter // the to-do file: one reference per line, done
}

// send tries payment i up to plainAttempts times, each with a new key, and
// marks it done after a final answer or after giving up.
func (w *plainWorker) send(i int) {
	w.out.printf("start %s %d", opID(i), time.Now().UnixNano())
	for attempt := 1; ; attempt++ {
		key := uuid.NewString()
		resp, err := w.post(i, key)
		if err == nil && !plainRetryable(resp.StatusCode) {
			w.out.printf("settled %s %s", opID(i), answerOf(resp, key))
			w.done.printf("%s", reference(i))
			return
		}
		wait := time.Duration(100<<min(attempt-1, 5)) * time.Millisecond
		if err == nil {
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 && s <= 60 {
				wait = time.Duration(s) * time.Second
			}
			answerOf(resp, key) // drain and close
		}
		if attempt == plainAttempts {
			w.out.printf("gaveup %s", opID(i))
			w.done.printf("%s", reference(i)) // dead-lettered: not retried by the next life
			return
		}
		time.Sleep(min(wait, 2*time.Second))
	}
}

func (w *plainWorker) post(i int, key string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, w.url+"/payments",
		strings.NewReader(paymentBody(i)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", demoSecret)
	req.Header.Set("Idempotency-Key", key)
	return w.client.Do(req)
}

// plainRetryable is the retry rule of a typical client: server errors, 429, 408, 409.
func plainRetryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests ||
		status == http.StatusRequestTimeout || status == http.StatusConflict
}
