// crash_test.go: S32 on Redis. A child process (this test binary, re-executed) serves the
// middleware on Redis; its handler records its effect by business reference in a file
// and blocks; the parent SIGKILLs it mid-request. Once the dead holder's lease has run
// out on Redis's clock, another instance never re-runs the handler: without a Recover
// hook the key answers 409, with one the hook finds the effect and its answer is stored
// and replayed.

package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/redisstore"
)

// The child's environment: the directory it shares with its parent (its URL and its
// effects go there) and the key prefix it uses.
const (
	envChildDir    = "IDEM_REDISSTORE_S32_DIR"
	envChildPrefix = "IDEM_REDISSTORE_S32_PREFIX"
)

const (
	s32Lease = time.Second // short, so the dead holder's lease lapses within the test
	s32TTL   = time.Minute
	s32Body  = `{"amount":700,"currency":"EUR"}`
)

// TestMain runs this binary as the S32 child when its environment says so.
func TestMain(m *testing.M) {
	if dir := os.Getenv(envChildDir); dir != "" {
		if err := s32Child(dir, os.Getenv(envChildPrefix)); err != nil {
			fmt.Fprintln(os.Stderr, "s32 child:", err)
		}
		os.Exit(2) // the child only ever ends by SIGKILL
	}
	os.Exit(m.Run())
}

// s32Child serves the middleware on Redis with a handler that writes its effect's
// reference to dir/effect-<key>, then blocks until the process is killed.
func s32Child(dir, prefix string) error {
	client := redis.NewClient(&redis.Options{Addr: redisAddr(), ContextTimeoutEnabled: true})
	store, err := redisstore.Open(context.Background(), client, &redisstore.Options{Prefix: prefix})
	if err != nil {
		return err
	}
	mw, err := server.New(&server.Options{Store: store, Lease: s32Lease, TTL: s32TTL})
	if err != nil {
		return err
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if err := writeFile(filepath.Join(dir, "effect-"+key), "pay_"+key); err != nil {
			fmt.Fprintln(os.Stderr, "s32 child:", err)
			return
		}
		select {} // mid-request, until SIGKILL
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "url"), "http://"+l.Addr().String()); err != nil {
		return err
	}
	return http.Serve(l, mw.Wrap(h))
}

// writeFile writes path whole or not at all, for a reader polling for it.
func writeFile(path, content string) error {
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func TestS32HandlerKilledOnRedis(t *testing.T) {
	leakcheck.Check(t)
	client := newClient(t)
	prefix := newPrefix(t, client)
	dir := t.TempDir()
	keys := []string{"k-no-hook", "k-hook"}

	// The child takes both keys and dies holding them.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildPrefix+"="+prefix)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var url []byte
	eventually(t, 10*time.Second, "the child's URL", func() bool {
		url, _ = os.ReadFile(filepath.Join(dir, "url"))
		return len(url) > 0
	})
	errs := make(chan error, len(keys))
	for _, key := range keys {
		go func() {
			_, err := send(context.Background(), string(url), key, s32Body)
			errs <- err
		}()
	}
	eventually(t, 10*time.Second, "both effects in the child", func() bool {
		for _, key := range keys {
			if _, err := os.Stat(filepath.Join(dir, "effect-"+key)); err != nil {
				return false
			}
		}
		return true
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	exited = true
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, not by SIGKILL; its output:\n%s", err, out.String())
	}
	for range keys {
		if err := <-errs; err == nil {
			t.Error("a request to the killed child got an answer")
		}
	}

	h := &payments{}
	var asked atomic.Int64
	recoverHook := func(_ context.Context, info server.RecoverInfo) (server.Recovery, error) {
		asked.Add(1)
		ref, err := os.ReadFile(filepath.Join(dir, "effect-"+info.Scope.Key))
		if err != nil {
			return server.Recovery{}, nil // cannot tell yet
		}
		return server.Recovery{Response: &server.Response{
			Status: http.StatusCreated,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   fmt.Appendf(nil, `{"id":%q,"recovered":true}`, ref),
		}}, nil
	}
	plain := newInstance(t, client, prefix, server.Options{Lease: s32Lease, TTL: s32TTL}, h)
	hooked := newInstance(t, newClient(t), prefix, server.Options{Lease: s32Lease, TTL: s32TTL, Recover: recoverHook}, h)

	t.Run("without Recover: 409, not re-run", func(t *testing.T) {
		var a answer
		eventually(t, 5*time.Second, "the dead holder's lease to lapse", func() bool {
			a = plain.post(keys[0], s32Body)
			if a.Status != http.StatusConflict {
				t.Fatalf("answer %d %s while the holder's record is in progress, want 409", a.Status, a.Body)
			}
			return a.ProblemType(t) != server.ProblemInProgress
		})
		for range 2 {
			if typ := a.ProblemType(t); typ != server.ProblemStuck {
				t.Errorf("409 %q after the lease, want %q", typ, server.ProblemStuck)
			}
			ra, _ := strconv.Atoi(a.Header.Get("Retry-After"))
			if ra <= int(s32Lease/time.Second) || ra > int(s32TTL/time.Second) {
				t.Errorf("Retry-After %q, want the time to the record's expiry (up to %v)", a.Header.Get("Retry-After"), s32TTL)
			}
			a = plain.post(keys[0], s32Body)
		}
	})

	t.Run("with Recover: the hook's answer, not re-run", func(t *testing.T) {
		var a answer
		eventually(t, 5*time.Second, "the dead holder's lease to lapse", func() bool {
			a = hooked.post(keys[1], s32Body)
			if a.Status == http.StatusConflict && a.ProblemType(t) != server.ProblemInProgress {
				t.Fatalf("409 %q, want key-in-progress until the hook answers", a.ProblemType(t))
			}
			return a.Status != http.StatusConflict
		})
		want := `{"id":"pay_k-hook","recovered":true}`
		for range 2 {
			if a.Status != http.StatusCreated || string(a.Body) != want || !a.Replayed() {
				t.Errorf("answer %d %s (replayed %v), want the hook's 201 %s, replayed", a.Status, a.Body, a.Replayed(), want)
			}
			a = plain.post(keys[1], s32Body) // stored: any instance replays it
		}
		if asked.Load() != 1 {
			t.Errorf("the hook was asked %d times, want 1", asked.Load())
		}
	})

	if h.runs.Load() != 0 {
		t.Errorf("the handler ran %d times after the child died, want 0", h.runs.Load())
	}
}
