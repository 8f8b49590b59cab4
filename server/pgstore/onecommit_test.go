// onecommit_test.go checks the one-commit path (OneCommit, Wrap, TxFrom) on the real
// PostgreSQL: the claim, the payment and the stored answer commit together or not at all,
// concurrent copies wait on the index and then replay (or run, after a rollback), and a
// connection killed mid-transaction leaves no row.

package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

// txPayer is the payments handler of the one-commit path: it inserts the payment in the
// request's transaction (TxFrom) and writes its answer. before runs first; then, if set,
// after runs with the transaction once the payment is in it, and its status (0: none)
// ends the handler.
type txPayer struct {
	schema  string
	before  func()
	after   func(ctx context.Context, tx pgx.Tx) int
	entered atomic.Int64
}

func (p *txPayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.entered.Add(1)
	if p.before != nil {
		p.before()
	}
	var req payment
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	tx, ok := pgstore.TxFrom(r.Context())
	if !ok {
		http.Error(w, "no transaction", http.StatusInternalServerError)
		return
	}
	var id int64
	if err := tx.QueryRow(r.Context(), `INSERT INTO `+pgx.Identifier{p.schema}.Sanitize()+`.payments (ref, amount) VALUES ($1, $2) RETURNING id`,
		req.Ref, req.Amount).Scan(&id); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if p.after != nil {
		if status := p.after(r.Context(), tx); status != 0 {
			http.Error(w, "failed after the payment", status)
			return
		}
	}
	write(w, paymentResponse(id, req))
}

// oneCommitService is a payments service on the one-commit path.
type oneCommitService struct {
	*instance
	pool   *pgxpool.Pool
	schema string
	payer  *txPayer
}

// newOneCommit serves a txPayer through a OneCommit on pool and schema (a fresh schema if
// ""), with so and mo as the Store's and the middleware's options.
func newOneCommit(t *testing.T, pool *pgxpool.Pool, schema string, so pgstore.Options, mo server.Options) *oneCommitService {
	t.Helper()
	if schema == "" {
		schema = testSchema(t, pool)
	}
	so.Schema = schema
	oc := openStore(t, pool, so).OneCommit()
	payments(t, pool, schema)
	p := &txPayer{schema: schema}
	mo.Store = oc
	return &oneCommitService{instance: newInstance(t, mo, oc.Wrap(p)), pool: pool, schema: schema, payer: p}
}

// records counts the rows of the records table.
func (s *oneCommitService) records(t *testing.T) int {
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{s.schema}.Sanitize()+`.server_records`).Scan(&n))
	return n
}

const ocBody = `{"ref":"order-1c","amount":1250}`

// A new key is one commit: the payment and the answer; a retry replays it byte for byte,
// and the same key with another body is 422.
func TestOneCommitReplayAndMismatch(t *testing.T) {
	pool := testPool(t)
	const settings = `SELECT current_setting('lock_timeout'), current_setting('statement_timeout')`
	var sessionLock, sessionStmt string // the pool's connections' own (0 unless the URL sets them)
	require.NoError(t, pool.QueryRow(context.Background(), settings).Scan(&sessionLock, &sessionStmt))
	s := newOneCommit(t, pool, "", pgstore.Options{}, server.Options{})
	s.payer.after = func(ctx context.Context, tx pgx.Tx) int {
		// The claim's timeouts are set back: the handler's statements run under the session's.
		var lock, stmt string
		require.NoError(t, tx.QueryRow(ctx, settings).Scan(&lock, &stmt))
		assert.Equal(t, sessionLock, lock)
		assert.Equal(t, sessionStmt, stmt)
		return 0
	}
	first := s.post("k1", ocBody)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	assert.False(t, first.Replayed())
	again := s.post("k1", ocBody)
	assert.Equal(t, http.StatusCreated, again.Status)
	assert.True(t, again.Replayed())
	assert.Equal(t, first.Body, again.Body)
	assert.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
	assert.Equal(t, first.Header.Get("Content-Type"), again.Header.Get("Content-Type"))
	other := s.post("k1", `{"ref":"order-other","amount":1}`)
	assert.Equal(t, http.StatusUnprocessableEntity, other.Status)
	assert.Equal(t, "key-reused", other.ProblemType(t))
	assert.EqualValues(t, 1, s.payer.entered.Load())
	assert.Equal(t, 1, paymentCount(t, s.pool, s.schema, "order-1c"))
}

// sendAsync sends key with body to in, and returns the function that waits for its answer.
func sendAsync(t *testing.T, in *instance, key, body string) func() answer {
	var got answer
	var wg sync.WaitGroup
	wg.Go(func() {
		var err error
		got, err = send(t.Context(), in.srv.URL, key, body)
		assert.NoError(t, err)
	})
	return func() answer { wg.Wait(); return got }
}

// waitingOnLock waits until a session of the test server waits on a lock: a copy's
// claim on the held key's index entry.
func waitingOnLock(t *testing.T, pool *pgxpool.Pool) {
	eventually(t, 10*time.Second, "a claim waiting on the key's lock", func() bool {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%server_records%'`).Scan(&n))
		return n > 0
	})
}

// Two instances, one database: the copy sent to b while a's handler runs waits on the
// key's index entry, then replays a's committed answer; a payment is made once.
func TestOneCommitConcurrentCopyReplays(t *testing.T) {
	mo := server.Options{StoreTimeout: 5 * time.Second}
	so := pgstore.Options{StatementTimeout: 5 * time.Second}
	a := newOneCommit(t, testPool(t), "", so, mo)
	b := newOneCommit(t, testPool(t), a.schema, so, mo)
	g := newGate(t)
	a.payer.before = g.wait
	first := sendAsync(t, a.instance, "k2", ocBody)
	eventually(t, 10*time.Second, "a's handler running", func() bool { return g.entered.Load() == 1 })
	copyAnswer := sendAsync(t, b.instance, "k2", ocBody)
	waitingOnLock(t, a.pool)
	g.release()
	got, cp := first(), copyAnswer()
	require.Equal(t, http.StatusCreated, got.Status, "%s", got.Body)
	assert.Equal(t, http.StatusCreated, cp.Status, "%s", cp.Body)
	assert.True(t, cp.Replayed())
	assert.Equal(t, got.Body, cp.Body)
	assert.EqualValues(t, 0, b.payer.entered.Load())
	assert.Equal(t, 1, paymentCount(t, a.pool, a.schema, "order-1c"))
}

// A handler that answers 5xx rolls back: no payment, no record; the copy that waited on
// the key then runs the handler itself.
func TestOneCommitRollbackFreesKey(t *testing.T) {
	mo := server.Options{StoreTimeout: 5 * time.Second}
	so := pgstore.Options{StatementTimeout: 5 * time.Second}
	a := newOneCommit(t, testPool(t), "", so, mo)
	b := newOneCommit(t, testPool(t), a.schema, so, mo)
	g := newGate(t)
	a.payer.before = g.wait
	a.payer.after = func(context.Context, pgx.Tx) int { return http.StatusBadGateway }
	first := sendAsync(t, a.instance, "k3", ocBody)
	eventually(t, 10*time.Second, "a's handler running", func() bool { return g.entered.Load() == 1 })
	copyAnswer := sendAsync(t, b.instance, "k3", ocBody)
	waitingOnLock(t, a.pool)
	g.release()
	assert.Equal(t, http.StatusBadGateway, first().Status)
	cp := copyAnswer()
	assert.Equal(t, http.StatusCreated, cp.Status, "%s", cp.Body)
	assert.False(t, cp.Replayed())
	assert.EqualValues(t, 1, b.payer.entered.Load())
	assert.Equal(t, 1, paymentCount(t, a.pool, a.schema, "order-1c"))
	assert.Equal(t, 1, a.records(t))
}

// A copy that waits longer than the lock timeout gets 409 with Retry-After, not 503.
func TestOneCommitWaitBounded(t *testing.T) {
	pool := testPool(t)
	a := newOneCommit(t, pool, "", pgstore.Options{}, server.Options{})
	b := newOneCommit(t, testPool(t), a.schema, pgstore.Options{StatementTimeout: 100 * time.Millisecond}, server.Options{})
	g := newGate(t)
	a.payer.before = g.wait
	first := sendAsync(t, a.instance, "k4", ocBody)
	eventually(t, 10*time.Second, "a's handler running", func() bool { return g.entered.Load() == 1 })
	cp := b.post("k4", ocBody)
	assert.Equal(t, http.StatusConflict, cp.Status, "%s", cp.Body)
	assert.Equal(t, "key-in-progress", cp.ProblemType(t))
	assert.NotEmpty(t, cp.Header.Get("Retry-After"))
	g.release()
	assert.Equal(t, http.StatusCreated, first().Status)
}

// A handler that panics after its payment rolls back: nothing happened, and the retry runs.
func TestOneCommitPanicRollsBack(t *testing.T) {
	s := newOneCommit(t, testPool(t), "", pgstore.Options{}, server.Options{})
	var once atomic.Bool
	s.payer.after = func(context.Context, pgx.Tx) int {
		if once.CompareAndSwap(false, true) {
			panic("after the payment")
		}
		return 0
	}
	_, err := send(t.Context(), s.srv.URL, "k5", ocBody)
	assert.Error(t, err, "net/http drops the connection of a handler that panicked")
	assert.Equal(t, 0, paymentCount(t, s.pool, s.schema, "order-1c"))
	assert.Equal(t, 0, s.records(t))
	got := s.post("k5", ocBody)
	assert.Equal(t, http.StatusCreated, got.Status, "%s", got.Body)
	assert.False(t, got.Replayed())
	assert.Equal(t, 1, paymentCount(t, s.pool, s.schema, "order-1c"))
}

// The transaction's connection killed before the commit (as when the process dies):
// PostgreSQL rolls it back, so no record and no payment are left, the client gets 503,
// and its retry runs the handler.
func TestOneCommitKilledConnection(t *testing.T) {
	s := newOneCommit(t, testPool(t), "", pgstore.Options{}, server.Options{})
	var once atomic.Bool
	s.payer.after = func(ctx context.Context, tx pgx.Tx) int {
		if once.CompareAndSwap(false, true) {
			var pid int
			require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
			var ok bool
			require.NoError(t, s.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1, 5000)`, pid).Scan(&ok))
			require.True(t, ok)
		}
		return 0
	}
	got := s.post("k6", ocBody)
	assert.Equal(t, http.StatusServiceUnavailable, got.Status, "%s", got.Body)
	assert.Equal(t, 0, paymentCount(t, s.pool, s.schema, "order-1c"))
	assert.Equal(t, 0, s.records(t))
	got = s.post("k6", ocBody)
	assert.Equal(t, http.StatusCreated, got.Status, "%s", got.Body)
	assert.Equal(t, 1, paymentCount(t, s.pool, s.schema, "order-1c"))
}

// Wrap under a middleware whose Store is not its OneCommit answers 500 without running
// the handler, and the key is released.
func TestOneCommitWrapMisused(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	st := openStore(t, pool, pgstore.Options{Schema: schema})
	p := &txPayer{schema: schema}
	in := newInstance(t, server.Options{Store: st}, st.OneCommit().Wrap(p))
	got := in.post("k7", ocBody)
	assert.Equal(t, http.StatusInternalServerError, got.Status)
	assert.EqualValues(t, 0, p.entered.Load())
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+`.server_records`).Scan(&n))
	assert.Equal(t, 0, n, "the claim was not released")
}

// cutAtCommit is a pgx tracer that, once armed, cuts a link's replies as the next COMMIT
// is sent: the database commits, and the client never hears it.
type cutAtCommit struct {
	cut   func()
	armed atomic.Bool
}

func (c *cutAtCommit) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if d.SQL == "commit" && c.armed.CompareAndSwap(true, false) {
		c.cut()
	}
	return ctx
}

func (c *cutAtCommit) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The commit lands but its reply is lost on the network: the client gets 503, and its
// retry, once the link is back, replays the committed answer; one payment.
func TestOneCommitLostCommitReply(t *testing.T) {
	direct := testPool(t)
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	require.NoError(t, err)
	link, host, port := pgtest.Link(t, cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, port, nil
	cfg.ConnConfig.DialFunc = link.DialContext
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	cutter := &cutAtCommit{cut: link.CutReplies}
	cfg.ConnConfig.Tracer = cutter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := newOneCommit(t, pool, testSchema(t, direct), pgstore.Options{StatementTimeout: 500 * time.Millisecond}, server.Options{})
	cutter.armed.Store(true)
	got := s.post("k8", ocBody)
	assert.Equal(t, http.StatusServiceUnavailable, got.Status, "%s", got.Body)
	link.Heal()
	assert.Equal(t, 1, paymentCount(t, direct, s.schema, "order-1c"), "the commit landed")
	got = s.post("k8", ocBody)
	assert.Equal(t, http.StatusCreated, got.Status, "%s", got.Body)
	assert.True(t, got.Replayed())
	assert.EqualValues(t, 1, s.payer.entered.Load())
	assert.Equal(t, 1, paymentCount(t, direct, s.schema, "order-1c"))
}

// A claim whose token was released before it arrived (the repeat of a claim whose reply
// was lost, given up meanwhile) is refused, as Store.Claim refuses it, rather than tried
// until no round is left.
func TestOneCommitRefusesAReleasedToken(t *testing.T) {
	pool := testPool(t)
	s := openStore(t, pool, pgstore.Options{Schema: testSchema(t, pool)})
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/payments", Key: "k"}
	tok := server.NewToken()
	if err := s.Release(ctx, sc, tok); err != nil {
		t.Fatalf("Release before any claim = %v", err)
	}
	if _, err := s.OneCommit().Claim(ctx, sc, tok, "fp", time.Minute, time.Hour); !errors.Is(err, server.ErrLeaseLost) {
		t.Fatalf("the late claim = %v, want ErrLeaseLost", err)
	}
	oc, other := s.OneCommit(), server.NewToken()
	cl, err := oc.Claim(ctx, sc, other, "fp", time.Minute, time.Hour)
	if err != nil || !cl.Claimed {
		t.Fatalf("another token's claim = %+v, %v", cl, err)
	}
	if err := oc.Release(ctx, sc, other); err != nil { // its transaction rolled back
		t.Fatal(err)
	}
}
