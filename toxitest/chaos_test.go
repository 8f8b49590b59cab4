// chaos_test.go sends payments through idem, a toxiproxy proxy and the
// testserver while TCP toxics act on the connections, then resumes what is
// left pending and checks exactly-once on the server's ledger.

package toxitest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
)

// toxic is one toxiproxy toxic: Stream is "upstream" (client to server) or
// "downstream" (server to client); Toxicity is the share of connections it
// acts on, drawn per connection.
type toxic struct {
	Name     string
	Type     string
	Stream   string
	Toxicity float32
	Attrs    toxiproxy.Attributes
}

// The toxics, one per kind and direction. Requests are ~300 bytes and
// responses ~400 bytes, so the limit_data limits cut the second or third
// exchange on a keep-alive connection, somewhere in its headers or body.
var (
	resetUp     = toxic{"reset_up", "reset_peer", "upstream", 0.25, toxiproxy.Attributes{"timeout": 0}}
	resetDown   = toxic{"reset_down", "reset_peer", "downstream", 0.25, toxiproxy.Attributes{"timeout": 0}}
	timeoutUp   = toxic{"timeout_up", "timeout", "upstream", 0.2, toxiproxy.Attributes{"timeout": 100}}
	timeoutDown = toxic{"timeout_down", "timeout", "downstream", 0.2, toxiproxy.Attributes{"timeout": 0}}
	latencyUp   = toxic{"latency_up", "latency", "upstream", 1, toxiproxy.Attributes{"latency": 60, "jitter": 60}}
	latencyDown = toxic{"latency_down", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 200, "jitter": 200}}
	slicerUp    = toxic{"slicer_up", "slicer", "upstream", 1, toxiproxy.Attributes{"average_size": 16, "size_variation": 8, "delay": 300}}
	slicerDown  = toxic{"slicer_down", "slicer", "downstream", 1, toxiproxy.Attributes{"average_size": 16, "size_variation": 8, "delay": 300}}
	limitUp     = toxic{"limit_up", "limit_data", "upstream", 0.5, toxiproxy.Attributes{"bytes": 500}}
	limitDown   = toxic{"limit_down", "limit_data", "downstream", 0.5, toxiproxy.Attributes{"bytes": 700}}
)

func TestExactlyOnceUnderToxics(t *testing.T) {
	all := []toxic{resetUp, resetDown, timeoutUp, timeoutDown, latencyUp, latencyDown, slicerUp, slicerDown, limitUp, limitDown}
	// The timeout toxics stay on in the toggled cases: toxiproxy drops the
	// data a timeout toxic holds when the toxic is interrupted (by a change
	// to it, or by adding a toxic after it), and the connection then carries
	// on with a hole in its byte stream, which TCP never does: the server
	// could read one request's headers with another's body.
	timeouts := []toxic{timeoutUp, timeoutDown}
	toggled := []toxic{resetUp, resetDown, latencyUp, latencyDown, slicerUp, slicerDown, limitUp, limitDown}
	// Toxicity is drawn per connection (and again whenever the proxy's toxics
	// change), so the cases of one toxic kind use a fresh connection per
	// attempt; the mixed ones reuse connections, as a real client does.
	cases := []chaosCase{
		{name: "none", ops: 100, keepAlive: true},
		{name: "reset_peer", ops: 200, toxics: []toxic{resetUp, resetDown}},
		{name: "timeout", ops: 150, toxics: []toxic{timeoutUp, timeoutDown}},
		{name: "latency_jitter", ops: 150, toxics: []toxic{latencyUp, latencyDown}},
		{name: "slicer", ops: 150, toxics: []toxic{slicerUp, slicerDown}},
		{name: "limit_data", ops: 200, toxics: []toxic{limitUp, limitDown}, keepAlive: true},
		{name: "together", ops: 200, toxics: all, keepAlive: true},
		{name: "toggled", ops: 300, toxics: timeouts, toggle: toggled, keepAlive: true},
		{name: "toggled_server_faults", ops: 200, toxics: timeouts, toggle: toggled, keepAlive: true, plan: testserver.DefaultMix},
	}
	for i, c := range cases {
		c.seed = uint64(i + 1)
		t.Run(c.name, func(t *testing.T) { runChaos(t, c) })
	}
}

type chaosCase struct {
	name      string
	ops       int     // payments, each its own operation ID and reference
	toxics    []toxic // on for the whole load
	toggle    []toxic // switched on and off at random while the load runs
	keepAlive bool    // reuse connections between attempts
	plan      string  // the testserver's own fault mix (ParsePlan), "" for none
	seed      uint64  // for the toggling
}

const (
	concurrency    = 16
	attemptTimeout = 400 * time.Millisecond
	callTimeout    = 15 * time.Second // bounds one call, all attempts included
	// resumeFor bounds the resume passes after the load. A pass that
	// settles nothing waits a second before the next: a host whose retry
	// budget is spent gets one probe a second, and twice as many sends
	// after each answered pass (idem.RetryBudget).
	resumeFor = 2 * time.Minute
)

// tally counts what the callers saw.
type tally struct {
	settled  atomic.Int64 // a final response
	pending  atomic.Int64 // *idem.PendingError: left for Resume
	bodyCut  atomic.Int64 // final response whose body did not arrive whole; called again
	unheard  atomic.Int64 // called again after bodyCut, no answer: *idem.AlreadySettledError
	resumed  atomic.Int64 // settled by Resume
	toggles  atomic.Int64
	restarts atomic.Int64 // toxiproxy servers killed and restarted (wedged or crashed)
	statuses sync.Map     // unexpected final status -> count
}

func runChaos(t *testing.T, c chaosCase) {
	plan, err := testserver.ParsePlan(c.seed, c.plan)
	if err != nil {
		t.Fatal(err)
	}
	srv := testserver.NewServer(&testserver.Options{RequireKey: true, Plan: plan})
	t.Cleanup(srv.Close)
	var n tally
	cp := newChaosProxy(t, c.name, strings.TrimPrefix(srv.URL, "http://"), &n)
	api := "http://" + cp.listen

	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = concurrency
	base.DisableKeepAlives = !c.keepAlive
	t.Cleanup(base.CloseIdleConnections)
	client, err := idem.Open(filepath.Join(t.TempDir(), "payments.journal"), &idem.Options{
		Base:              base,
		AttemptTimeout:    attemptTimeout,
		InitialInterval:   10 * time.Millisecond,
		MaxInterval:       100 * time.Millisecond,
		ResumeConcurrency: concurrency,
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			client.Close()
		}
	})
	hc := client.HTTPClient()

	cp.add(t, c.toxics)
	cp.add(t, c.toggle)
	start := time.Now()
	stopToggling := cp.toggle(t, c.toggle, c.seed)

	refs := make([]string, c.ops)
	work := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range work {
				pay(t, hc, api, c.name, i, &n)
			}
		})
	}
	for i := range c.ops {
		refs[i] = ref(c.name, i)
		work <- i
	}
	close(work)
	wg.Wait()
	stopToggling()
	loadTime := time.Since(start)

	cp.removeToxics(t)
	base.CloseIdleConnections()
	passes := resume(t, client, &n)

	// Close flushes deferred settles; the journal is then read back from disk.
	if err := client.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	closed = true
	attempts := checkJournal(t, client.Journal().Path(), c.ops)

	ledger := srv.Ledger()
	if err := ledger.Check(refs); err != nil {
		t.Errorf("ledger: %v", err)
	}
	if got := ledger.Payments(); got != c.ops {
		t.Errorf("ledger has %d payments, want %d", got, c.ops)
	}
	n.statuses.Range(func(k, v any) bool {
		t.Errorf("%d calls ended with status %v", v.(*atomic.Int64).Load(), k)
		return true
	})
	t.Logf("toxitest %-21s ops=%d server_attempts=%d client_attempts=%d replays=%d in_progress_409=%d "+
		"settled_in_call=%d pending_after_call=%d resumed=%d resume_passes=%d body_cut=%d recall_unanswered=%d toggles=%d toxiproxy_restarts=%d server_faults=%d load=%v total=%v",
		c.name, c.ops, ledger.Requests, attempts, ledger.Replays, ledger.InProgress,
		n.settled.Load(), n.pending.Load(), n.resumed.Load(), passes, n.bodyCut.Load(), n.unheard.Load(), n.toggles.Load(), n.restarts.Load(), faults(ledger),
		loadTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func faults(l testserver.Ledger) (n int) {
	for _, k := range l.Faults {
		n += k
	}
	return n
}

func ref(name string, i int) string { return fmt.Sprintf("%s-%04d", name, i) }

// pay makes payment i through idem. A final response whose body is cut by
// the network is settled already; calling again with the same operation ID
// sends the same key, so the server replays its stored answer.
func pay(t *testing.T, hc *http.Client, api, name string, i int, n *tally) {
	body := fmt.Sprintf(`{"amount": %d, "currency": "eur", "reference": %q}`, 100+i, ref(name, i))
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		ctx = idem.WithOperationID(ctx, name+"/"+ref(name, i))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/payments", strings.NewReader(body))
		if err != nil {
			cancel()
			t.Error(err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		var pending *idem.PendingError
		var settled *idem.AlreadySettledError
		switch {
		case errors.As(err, &pending):
			cancel()
			n.pending.Add(1)
			return
		case errors.As(err, &settled):
			// The stored answer is final; only its body is lost.
			cancel()
			n.unheard.Add(1)
			if settled.Status != http.StatusCreated {
				count(&n.statuses, settled.Status)
			}
			return
		case err != nil:
			cancel()
			t.Errorf("payment %d: %v", i, err)
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusCreated {
			count(&n.statuses, resp.StatusCode)
			t.Logf("payment %d: %d %s %s", i, resp.StatusCode, resp.Header, b)
			return
		}
		if err == nil {
			n.settled.Add(1)
			return
		}
		n.bodyCut.Add(1)
	}
	t.Errorf("payment %d: body cut 5 times", i)
}

func count(m *sync.Map, k any) {
	v, _ := m.LoadOrStore(k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// chaosProxy is a toxiproxy proxy in front of the testserver, on a fixed
// listen address for the whole case: the journal holds URLs with that
// address, so Resume must find the proxy there again. When toxiproxy wedges
// or crashes, the server is restarted and the proxy made again on that
// address, without toxics; that drops every connection through it, one more
// fault for idem.
type chaosProxy struct {
	name, listen, upstream string
	srv                    *toxiServer
	proxy                  *toxiproxy.Proxy
	n                      *tally
}

func newChaosProxy(t *testing.T, name, upstream string, n *tally) *chaosProxy {
	srv := startToxiproxy(t)
	p := srv.newProxy(t, "idem_"+name, "127.0.0.1:0", upstream)
	return &chaosProxy{name: p.Name, listen: p.Listen, upstream: upstream, srv: srv, proxy: p, n: n}
}

// restart kills the toxiproxy server and starts a new one with the proxy,
// without toxics.
func (cp *chaosProxy) restart(t *testing.T, why error) {
	t.Logf("restarting toxiproxy: %v", why)
	cp.n.restarts.Add(1)
	cp.srv.kill()
	cp.srv = startToxiproxy(t)
	cp.proxy = cp.srv.newProxy(t, cp.name, cp.listen, cp.upstream)
}

// add adds toxics to the proxy.
func (cp *chaosProxy) add(t *testing.T, toxics []toxic) {
	t.Helper()
	for _, x := range toxics {
		err := cp.srv.call(func() error {
			_, err := cp.proxy.AddToxic(x.Name, x.Type, x.Stream, x.Toxicity, x.Attrs)
			return err
		})
		if err != nil {
			t.Fatalf("add toxic %s: %v", x.Name, err)
		}
	}
}

// toggle switches the toxics, added switched on, off and on at random
// every 5-30 ms until the returned function is called. It changes their
// toxicity rather than adding and removing them: toxiproxy v2.5.0 can panic
// when a toxic is added after another was removed while a connection through
// it was closing (index out of range in ToxicLink.AddToxic). A toxicity
// change acts on live connections too: each draws again whether the toxic
// acts on it.
func (cp *chaosProxy) toggle(t *testing.T, toxics []toxic, seed uint64) (stop func()) {
	if len(toxics) == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 0))
		on := make([]bool, len(toxics))
		for k := range on {
			on[k] = true
		}
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(5+rng.IntN(25)) * time.Millisecond):
			}
			k := rng.IntN(len(toxics))
			x := toxics[k]
			toxicity := x.Toxicity
			if on[k] {
				toxicity = 0
			}
			err := cp.srv.call(func() error {
				_, err := cp.proxy.UpdateToxic(x.Name, toxicity, x.Attrs)
				return err
			})
			if err != nil {
				cp.restart(t, fmt.Errorf("toggle %s: %w", x.Name, err))
				cp.add(t, toxics)
				for k := range on {
					on[k] = true
				}
				continue
			}
			on[k] = !on[k]
			cp.n.toggles.Add(1)
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// removeToxics removes every toxic; if toxiproxy wedges meanwhile, the
// restart leaves a proxy without toxics as well.
func (cp *chaosProxy) removeToxics(t *testing.T) {
	t.Helper()
	var ts toxiproxy.Toxics
	err := cp.srv.call(func() (err error) {
		ts, err = cp.proxy.Toxics()
		return err
	})
	for _, x := range ts {
		if err != nil {
			break
		}
		err = cp.srv.call(func() error { return cp.proxy.RemoveToxic(x.Name) })
	}
	if err != nil {
		cp.restart(t, fmt.Errorf("remove toxics: %w", err))
	}
}

// resume runs Resume until nothing is pending, for at most resumeFor, and
// returns the number of passes.
func resume(t *testing.T, client *idem.Client, n *tally) int {
	t.Helper()
	deadline := time.Now().Add(resumeFor)
	before := -1 // pending before the last pass
	for pass := 0; ; pass++ {
		next, left := pendingOps(t, client.Journal())
		if left == 0 {
			return pass
		}
		if time.Now().After(deadline) {
			t.Errorf("%d operations still pending after %d resume passes in %v", left, pass, resumeFor)
			return pass
		}
		switch wait := time.Until(next); {
		case wait > 0:
			time.Sleep(min(wait, time.Second))
		case left == before: // the budget held them back: wait for its probe
			time.Sleep(time.Second)
		}
		before = left
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := client.Resume(ctx, func(o idem.Outcome) {
			if o.Response == nil {
				return // still pending: the next pass takes it
			}
			io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
			if o.Response.StatusCode != http.StatusCreated {
				count(&n.statuses, fmt.Sprintf("%d (resumed)", o.Response.StatusCode))
				return
			}
			n.resumed.Add(1)
		})
		cancel()
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
	}
}

// pendingOps returns how many operations are pending and the earliest time
// one of them may be sent again.
func pendingOps(t *testing.T, j *boltjournal.Journal) (next time.Time, n int) {
	t.Helper()
	recs, err := j.Records()
	if err != nil {
		t.Fatalf("journal: %v", err)
	}
	for _, r := range recs {
		if r.State != idem.StatePending {
			continue
		}
		if n == 0 || r.NextAttempt.Before(next) {
			next = r.NextAttempt
		}
		n++
	}
	return next, n
}

// checkJournal reopens the closed journal from disk and checks that it holds
// ops operations, all settled with 201. It returns the attempts they record.
func checkJournal(t *testing.T, path string, ops int) (attempts int) {
	t.Helper()
	j, err := boltjournal.OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	recs, err := j.Records()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != ops {
		t.Errorf("journal holds %d records, want %d", len(recs), ops)
	}
	for _, r := range recs {
		attempts += r.Attempts
		if r.State != idem.StateSettled || r.Status != http.StatusCreated {
			t.Errorf("operation %s: state %v, status %d, last error %q", r.OperationID, r.State, r.Status, r.LastError)
		}
		if u, err := url.Parse(r.URL); err != nil || u.Path != "/payments" {
			t.Errorf("operation %s: URL %q", r.OperationID, r.URL)
		}
	}
	return attempts
}
