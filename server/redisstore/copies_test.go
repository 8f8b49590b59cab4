// copies_test.go: S31 on Redis. Two middleware instances, each with its own go-redis client
// and loopback server, share one Redis; copies of one key sent to both at once run the
// handler exactly once.

package redisstore_test

import (
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
)

const (
	s31Copies = 8
	s31Body   = `{"amount":1250,"currency":"EUR"}`
	s31Lease  = 5 * time.Second
)

// pair starts two instances sharing one Redis and one key prefix, each on its own client,
// around one handler, with opts; wrap, if not nil, wraps each instance's Store.
func pair(t *testing.T, opts server.Options, h http.Handler, wrap func(server.Store) server.Store) [2]*instance {
	first := newClient(t)
	prefix := newPrefix(t, first)
	var ins [2]*instance
	for i := range ins {
		client := first
		if i == 1 {
			client = newClient(t)
		}
		o := opts
		if wrap != nil {
			o.Store = wrap(storeOn(t, client, prefix))
		}
		ins[i] = newInstance(t, client, prefix, o, h)
	}
	return ins
}

// fire sends s31Copies copies of key to the two instances alternately, all at once, while
// g holds the handler; once ready holds (what, within ten seconds) it releases g, and
// returns the answers in order when all came. It releases g and collects every answer
// before failing t, so no request outlives the test.
func fire(t *testing.T, ins [2]*instance, key string, g *gate, what string, ready func() bool) []answer {
	t.Helper()
	answers := make([]answer, s31Copies)
	errs := make([]error, s31Copies)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i], errs[i] = send(t.Context(), ins[i%2].url, key, s31Body) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for !ready() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ok := ready()
	g.release()
	wg.Wait()
	if !ok {
		t.Fatalf("timed out waiting for %s", what)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	return answers
}

// Without Wait: one copy runs the handler, the seven others get 409 key-in-progress with
// a Retry-After from the holder's lease; retries on either instance replay the answer.
func TestS31TwoInstancesOneRedis(t *testing.T) {
	leakcheck.Check(t)
	h := &payments{gate: newGate()}
	obs := &observer{}
	ins := pair(t, server.Options{Lease: s31Lease, Observer: obs}, h, nil)

	answers := fire(t, ins, "k-s31", h.gate, "seven 409s", func() bool { return obs.conflicts.Load() == s31Copies-1 })

	var first answer
	created := 0
	for i, a := range answers {
		switch a.Status {
		case http.StatusCreated:
			created++
			first = a
		case http.StatusConflict:
			if typ := a.ProblemType(t); typ != server.ProblemInProgress {
				t.Errorf("copy %d: 409 %q, want %q", i, typ, server.ProblemInProgress)
			}
			ra, err := strconv.Atoi(a.Header.Get("Retry-After"))
			if err != nil || ra < 1 || ra > int(s31Lease/time.Second) {
				t.Errorf("copy %d: Retry-After %q, want 1..%d s (the holder's lease left)", i, a.Header.Get("Retry-After"), s31Lease/time.Second)
			}
		default:
			t.Errorf("copy %d: %d %s", i, a.Status, a.Body)
		}
	}
	if created != 1 || h.runs.Load() != 1 {
		t.Fatalf("%d copies got 201 and the handler ran %d times; want 1 and 1", created, h.runs.Load())
	}
	if first.Replayed() {
		t.Error("the copy that ran the handler is marked as a replay")
	}
	for _, in := range ins {
		again := in.post("k-s31", s31Body)
		checkReplay(t, first, again)
	}
	if h.runs.Load() != 1 {
		t.Errorf("the handler ran %d times after the retries, want 1", h.runs.Load())
	}
}

// With Wait: every copy that found the key in progress polls Redis until the holder has
// answered, then replays that answer byte for byte.
func TestS31TwoInstancesOneRedisWait(t *testing.T) {
	leakcheck.Check(t)
	h := &payments{gate: newGate()}
	var counters []*countingStore
	var mu sync.Mutex
	ins := pair(t, server.Options{Lease: s31Lease, Wait: 20 * time.Second}, h, func(s server.Store) server.Store {
		cs := &countingStore{Store: s}
		mu.Lock()
		counters = append(counters, cs)
		mu.Unlock()
		return cs
	})
	found := func() (n int64) {
		for _, cs := range counters {
			n += cs.found.Load()
		}
		return n
	}

	answers := fire(t, ins, "k-s31-wait", h.gate, "seven copies polling", func() bool { return found() >= 2*(s31Copies-1) })

	var first answer
	var replays []answer
	for i, a := range answers {
		switch {
		case a.Status != http.StatusCreated:
			t.Errorf("copy %d: %d %s, want 201", i, a.Status, a.Body)
		case a.Replayed():
			replays = append(replays, a)
		default:
			first = a
		}
	}
	if len(replays) != s31Copies-1 || h.runs.Load() != 1 {
		t.Fatalf("%d replays, handler ran %d times; want %d and 1", len(replays), h.runs.Load(), s31Copies-1)
	}
	for _, a := range replays {
		checkReplay(t, first, a)
	}
}

// checkReplay fails t unless got is orig replayed: status, body and every header field
// byte for byte, but for Date and the replay mark.
func checkReplay(t *testing.T, orig, got answer) {
	t.Helper()
	if !got.Replayed() {
		t.Errorf("answer %d %s is not marked Idempotent-Replayed", got.Status, got.Body)
	}
	if got.Status != orig.Status || string(got.Body) != string(orig.Body) {
		t.Errorf("replay = %d %q, want %d %q", got.Status, got.Body, orig.Status, orig.Body)
	}
	strip := func(h http.Header) http.Header {
		h = h.Clone()
		h.Del("Date")
		h.Del("Idempotent-Replayed")
		return h
	}
	if a, b := strip(orig.Header), strip(got.Header); !reflect.DeepEqual(a, b) {
		t.Errorf("replayed header = %v, want %v", b, a)
	}
}
