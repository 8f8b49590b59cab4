// crash_test.go: S32 on PostgreSQL with a real crash. A child process (this test binary
// re-executed) serves the middleware on PostgreSQL; its handler commits the payment in its
// own table, then blocks mid-request; the parent SIGKILLs it. Once its lease has run out,
// another instance gets the same key: without a Recover hook, 409 (never re-run); with a
// hook that finds the payment by its business reference, the hook's answer.

package pgstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// s32ChildEnv names the schema the child serves on; set only in the child.
const s32ChildEnv = "IDEM_PGSTORE_S32_CHILD"

// s32Lease is the child's lease: short, so the parent waits about a second after the kill.
const s32Lease = time.Second

const s32Body = `{"ref":"order-s32","amount":700}`

func TestS32HandlerKilledOnPostgres(t *testing.T) {
	if schema := os.Getenv(s32ChildEnv); schema != "" {
		s32Child(t, schema) // never returns: the parent kills it
	}
	leakcheck.Check(t)
	pool := testPool(t)
	schema := testSchema(t, pool)
	s := openStore(t, pool, pgstore.Options{Schema: schema})
	payments(t, pool, schema)

	// The child: its URL, then word of the effect, on stdout.
	cmd := exec.Command(os.Args[0], "-test.run=^TestS32HandlerKilledOnPostgres$", "-test.count=1")
	cmd.Env = append(os.Environ(), s32ChildEnv+"="+schema)
	errf, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer errf.Close()
	cmd.Stderr = errf // a file: the child writes it directly, no goroutine of ours
	stderr := func() string { b, _ := os.ReadFile(errf.Name()); return string(b) }
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string, 4)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "S32CHILD "); ok {
				lines <- line
			}
		}
	}()
	next := func(what string) string {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the child ended before %s; stderr:\n%s", what, stderr())
			}
			return line
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s from the child in 20 s; stderr:\n%s", what, stderr())
			return ""
		}
	}
	url, ok := strings.CutPrefix(next("its URL"), "url ")
	require.True(t, ok)

	sent := make(chan error, 1)
	go func() {
		_, err := send(context.Background(), url, "k-s32", s32Body)
		sent <- err
	}()
	require.Equal(t, "effect", next("the effect"))
	require.Equal(t, 1, paymentCount(t, pool, schema, "order-s32"), "the child's payment is not committed")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	killed = true
	_ = cmd.Wait()
	assert.Error(t, <-sent, "the killed child's client got an answer")
	for range lines {
	}

	// Without a hook: 409 while the dead holder's lease runs, then 409 key-stuck; the
	// handler never runs.
	var reran atomic.Int64
	p := &payer{pool: pool, store: s, schema: schema, before: func() { reran.Add(1) }}
	plain := newInstance(t, server.Options{Store: s, Lease: s32Lease}, p)
	var got answer
	eventually(t, 10*time.Second, "the dead holder's lease to run out", func() bool {
		got = plain.post("k-s32", s32Body)
		require.Equal(t, http.StatusConflict, got.Status, "%s", got.Body)
		return got.ProblemType(t) == "key-stuck"
	})
	ra, err := strconv.Atoi(got.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.Greater(t, ra, 3600, "Retry-After is not the time until the record expires (24 h)")
	assert.Equal(t, http.StatusConflict, plain.post("k-s32", s32Body).Status)

	// With a hook that finds the payment by its reference: the hook's answer, stored and
	// replayed; the hook is asked once, the handler never.
	var asked atomic.Int64
	recovering := newInstance(t, server.Options{Store: s, Lease: s32Lease, Recover: func(ctx context.Context, info server.RecoverInfo) (server.Recovery, error) {
		asked.Add(1)
		return findPayment(ctx, pool, schema, info.Body)
	}}, p)
	var pay payment
	require.NoError(t, json.Unmarshal([]byte(s32Body), &pay))
	id := paymentID(t, pool, schema, pay.Ref)
	want := paymentResponse(id, pay)
	for range 2 {
		got := recovering.post("k-s32", s32Body)
		require.Equal(t, http.StatusCreated, got.Status, "%s", got.Body)
		assert.True(t, got.Replayed())
		assert.Equal(t, want.Body, got.Body)
		assert.Equal(t, want.Header.Get("Location"), got.Header.Get("Location"))
	}
	assert.True(t, plain.post("k-s32", s32Body).Replayed(), "the instance without a hook replays the recovered answer")
	assert.EqualValues(t, 1, asked.Load())
	assert.Zero(t, reran.Load(), "the handler ran again")
	assert.Equal(t, 1, paymentCount(t, pool, schema, "order-s32"))
	assert.Equal(t, 1, recovering.obs.Count("recovered:replay 201"))
}

// findPayment is the Recover hook: it looks the payment up by the request's reference and
// answers as the handler would have; no payment means it did not happen, so a re-run is safe.
func findPayment(ctx context.Context, pool *pgxpool.Pool, schema string, body []byte) (server.Recovery, error) {
	var p payment
	if err := json.Unmarshal(body, &p); err != nil {
		return server.Recovery{}, err
	}
	var id int64
	err := pool.QueryRow(ctx, `SELECT id FROM `+pgx.Identifier{schema}.Sanitize()+`.payments WHERE ref = $1`, p.Ref).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return server.Recovery{Rerun: true}, nil
	case err != nil:
		return server.Recovery{}, err
	}
	return server.Recovery{Response: paymentResponse(id, p)}, nil
}

func paymentID(t *testing.T, pool *pgxpool.Pool, schema, ref string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id FROM `+pgx.Identifier{schema}.Sanitize()+
		`.payments WHERE ref = $1`, ref).Scan(&id))
	return id
}

// s32Child serves the middleware on schema with a handler that commits the payment, says
// so on stdout, and blocks until the process is killed.
func s32Child(t *testing.T, schema string) {
	pool := testPool(t)
	s, err := pgstore.Open(context.Background(), pool, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("child: Open: %v", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p payment
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if _, err := pool.Exec(r.Context(), `INSERT INTO `+pgx.Identifier{schema}.Sanitize()+
			`.payments (ref, amount) VALUES ($1, $2)`, p.Ref, p.Amount); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Println("S32CHILD effect")
		select {} // the process dies here
	})
	mw, err := server.New(&server.Options{Store: s, Lease: s32Lease})
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	fmt.Printf("S32CHILD url http://%s\n", l.Addr())
	t.Fatalf("child: %v", http.Serve(l, mw.Wrap(h)))
}
