// outcomes.go holds scenario S40: each way a handler can end, with and without a Recover
// hook, through the middleware on a Store under test. An uncertain end (a 5xx it did not
// explain, a panic) never runs the effect again; a declared "nothing happened" frees the
// key.

package servertest

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/idem-go/idem/server"
)

// charge is a handler's business, as a Recover hook sees it: the effect counted, and the
// answer it would have given, found by reference.
type charge struct {
	effects atomic.Int64
	asked   atomic.Int64 // Recover calls
}

// recoverHook looks the charge up: made means replay its answer; not made means run again.
func (ch *charge) recoverHook(context.Context, server.RecoverInfo) (server.Recovery, error) {
	ch.asked.Add(1)
	if ch.effects.Load() == 0 {
		return server.Recovery{Rerun: true}, nil
	}
	return server.Recovery{Response: &server.Response{Status: http.StatusCreated, Body: []byte(`{"id":"found"}`)}}, nil
}

// Outcomes is scenario S40, a row of the outcome table (server/README.md) per subtest, each
// with and without Options.Recover. c.Open's Store must keep real time, or run on a clock
// the scenarios need not move.
func Outcomes(t *testing.T, c Config) {
	t.Helper()
	for _, row := range []struct {
		name string
		// handler: the first try's handler, which may charge; later tries charge and answer 201.
		first func(ch *charge, w http.ResponseWriter, r *http.Request)
		// what a retry must see, without and with a Recover hook
		check, checkRecover func(t *testing.T, ch *charge, first, retry answer)
	}{
		{
			name: "5xxUndeclared", // charged, then failed to write its own row
			first: func(ch *charge, w http.ResponseWriter, r *http.Request) {
				ch.effects.Add(1)
				http.Error(w, "could not save the payment", http.StatusInternalServerError)
			},
			check: func(t *testing.T, ch *charge, first, retry answer) {
				wantReplay(t, first, retry, http.StatusInternalServerError)
			},
			checkRecover: func(t *testing.T, ch *charge, _, retry answer) {
				wantFound(t, ch, retry)
			},
		},
		{
			name: "5xxDiscarded", // failed before any effect, and said so
			first: func(ch *charge, w http.ResponseWriter, r *http.Request) {
				server.DiscardResponse(r.Context())
				http.Error(w, "provider unavailable", http.StatusServiceUnavailable)
			},
			check:        wantRerun,
			checkRecover: wantRerun,
		},
		{
			name: "PanicBeforeWriting", // charged, then panicked before answering
			first: func(ch *charge, w http.ResponseWriter, r *http.Request) {
				ch.effects.Add(1)
				panic(http.ErrAbortHandler)
			},
			check: func(t *testing.T, ch *charge, _, retry answer) {
				wantLookUp(t, ch, retry)
			},
			checkRecover: func(t *testing.T, ch *charge, _, retry answer) {
				wantFound(t, ch, retry)
			},
		},
		{
			name: "PanicBeforeEffect", // panicked before anything happened
			first: func(ch *charge, w http.ResponseWriter, r *http.Request) {
				panic(http.ErrAbortHandler)
			},
			check: func(t *testing.T, ch *charge, _, retry answer) {
				wantLookUp(t, ch, retry) // the middleware cannot tell it from the row above
			},
			checkRecover: func(t *testing.T, ch *charge, _, retry answer) {
				if retry.status != http.StatusCreated || retry.replayed || ch.effects.Load() != 1 || ch.asked.Load() != 1 {
					t.Errorf("retry = %+v after %d effects, %d Recover calls; want the rerun's 201, one effect, one call",
						retry, ch.effects.Load(), ch.asked.Load())
				}
			},
		},
		{
			name: "PanicAfterWriting", // charged, wrote half its answer, panicked
			first: func(ch *charge, w http.ResponseWriter, r *http.Request) {
				ch.effects.Add(1)
				w.Header().Set("Content-Length", "100")
				w.WriteHeader(http.StatusCreated)
				fmt.Fprint(w, `{"id":`)
				http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler)
			},
			check: func(t *testing.T, ch *charge, _, retry answer) {
				wantLookUp(t, ch, retry)
			},
			checkRecover: func(t *testing.T, ch *charge, _, retry answer) {
				wantFound(t, ch, retry)
			},
		},
	} {
		for _, withRecover := range []bool{false, true} {
			name := row.name
			if withRecover {
				name += "/Recover"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ch := &charge{}
				o := server.Options{Store: c.Open(t), Lease: c.lease()}
				if withRecover {
					o.Recover = ch.recoverHook
				}
				var tries atomic.Int64
				s := newService(t, o, func(w http.ResponseWriter, r *http.Request) {
					if tries.Add(1) == 1 {
						row.first(ch, w, r)
						return
					}
					ch.effects.Add(1)
					w.WriteHeader(http.StatusCreated)
					fmt.Fprint(w, `{"id":"rerun"}`)
				})
				first := s.post("k")
				var retry answer
				within(t, c.lease(), "a retry gets an answer", func() bool {
					retry = s.post("k")
					return retry.status != http.StatusConflict
				})
				check := row.check
				if withRecover {
					check = row.checkRecover
				}
				check(t, ch, first, retry)
				if withRecover && row.name != "5xxDiscarded" && ch.asked.Load() != 1 {
					t.Errorf("Recover was asked %d times, want once", ch.asked.Load())
				}
				if !withRecover || row.name == "5xxDiscarded" {
					if ch.asked.Load() != 0 {
						t.Errorf("Recover was asked %d times, want never", ch.asked.Load())
					}
				}
			})
		}
	}
}

// wantReplay: the retry replays the first answer, status, and nothing ran again.
func wantReplay(t *testing.T, first, retry answer, status int) {
	t.Helper()
	if first.status != status || !retry.replayed || retry.status != status || retry.body != first.body {
		t.Errorf("first %+v, retry %+v; want %d replayed byte for byte", first, retry, status)
	}
}

// wantRerun: the key was freed and the retry ran the handler, whose effect is the only one.
func wantRerun(t *testing.T, ch *charge, _, retry answer) {
	t.Helper()
	if retry.status != http.StatusCreated || retry.replayed || ch.effects.Load() != 1 {
		t.Errorf("retry = %+v after %d effects, want the rerun's 201 and one effect", retry, ch.effects.Load())
	}
}

// wantFound: the Recover hook found the effect, whose answer the retry gets.
func wantFound(t *testing.T, ch *charge, retry answer) {
	t.Helper()
	if retry.status != http.StatusCreated || retry.body != `{"id":"found"}` || ch.effects.Load() != 1 {
		t.Errorf("retry = %+v after %d effects, want the hook's answer and one effect", retry, ch.effects.Load())
	}
}

// wantLookUp: without a hook the retry is told to look the outcome up (422 not-replayable,
// the original status 500 for a panic) and nothing ran again.
func wantLookUp(t *testing.T, ch *charge, retry answer) {
	t.Helper()
	if retry.status != http.StatusUnprocessableEntity || retry.problem != server.ProblemNotReplayable || ch.effects.Load() > 1 {
		t.Errorf("retry = %+v after %d effects, want 422 %s and no effect again", retry, ch.effects.Load(), server.ProblemNotReplayable)
	}
}
