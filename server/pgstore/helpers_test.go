// helpers_test.go has what the tests share: the PostgreSQL server under test (its
// address from IDEM_POSTGRES_URL, a random schema per test, dropped when the test ends;
// internal/pgtest), and a payments service on it (the middleware on a pgstore Store, a
// handler that writes its payment and the stored answer in one transaction) on a loopback
// server, with plain requests on fresh connections and a recording Observer.

package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/internal/servicetest"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// testPool connects to the test server, closed when t ends. If the server does not
// answer, it fails t when CI is set and skips it otherwise.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return pgtest.Connect(t, pgtest.URL(), pgxpool.New, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
}

// testSchema returns a fresh schema name, dropped with everything in it when t ends.
func testSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return pgtest.Schema(t, "idem_pgstore_", pool.Exec)
}

// openStore opens a Store on pool in schema, closed when t ends.
func openStore(t testing.TB, pool *pgxpool.Pool, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pool, &opts)
	if err != nil {
		t.Fatalf("Open schema %s: %v", opts.Schema, err)
	}
	t.Cleanup(s.Close)
	return s
}

// payments creates the business table in schema: one row per payment, unique by the
// client's reference.
func payments(t testing.TB, pool *pgxpool.Pool, schema string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()+
		`.payments (id bigserial PRIMARY KEY, ref text NOT NULL UNIQUE, amount bigint NOT NULL)`)
	require.NoError(t, err)
}

// paymentCount counts the payments with ref.
func paymentCount(t testing.TB, pool *pgxpool.Pool, schema, ref string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+
		`.payments WHERE ref = $1`, ref).Scan(&n))
	return n
}

// payment is a request's body.
type payment struct {
	Ref    string `json:"ref"`
	Amount int64  `json:"amount"`
}

// paymentResponse is the answer for the payment with id.
func paymentResponse(id int64, p payment) *server.Response {
	return &server.Response{
		Status: http.StatusCreated,
		Header: http.Header{"Content-Type": {"application/json"}, "Location": {fmt.Sprintf("/payments/%d", id)}},
		Body:   fmt.Appendf(nil, `{"id":%d,"ref":%q,"amount":%d}`, id, p.Ref, p.Amount),
	}
}

// write writes resp to w.
func write(w http.ResponseWriter, resp *server.Response) {
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// payer is the payments handler: in one transaction it inserts the payment and completes
// its idempotency record (CompleteTx), then commits and writes the same answer. before,
// if set, runs first (a gate); fail, if it returns true, makes the handler roll back after
// both writes and answer 500, as a failure before commit would.
type payer struct {
	pool    *pgxpool.Pool
	store   *pgstore.Store
	schema  string
	before  func()
	fail    func() bool
	effects atomic.Int64 // committed payments
}

func (p *payer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.before != nil {
		p.before()
	}
	var req payment
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	hold, ok := server.HoldFrom(ctx)
	if !ok {
		http.Error(w, "no idempotency hold", http.StatusInternalServerError)
		return
	}
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO `+pgx.Identifier{p.schema}.Sanitize()+`.payments (ref, amount) VALUES ($1, $2) RETURNING id`,
		req.Ref, req.Amount).Scan(&id); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp := paymentResponse(id, req)
	if err := p.store.CompleteTx(ctx, tx, hold, resp); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError) // rolled back: no payment
		return
	}
	if p.fail != nil && p.fail() {
		http.Error(w, "downstream failed", http.StatusInternalServerError) // rolled back
		return
	}
	if err := tx.Commit(ctx); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.effects.Add(1)
	write(w, resp)
}

// instance is one middleware instance on a loopback server.
type instance struct {
	t   *testing.T
	srv *httptest.Server
	obs *recorder
}

// newInstance serves h behind a middleware with opts (Observer filled in) on a loopback
// server closed when t ends.
func newInstance(t *testing.T, opts server.Options, h http.Handler) *instance {
	t.Helper()
	in := &instance{t: t, obs: &recorder{}}
	opts.Observer = in.obs
	mw, err := server.New(&opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = mw.Shutdown(ctx) // a Store down for good leaves repeats to give up
	})
	in.srv = httptest.NewUnstartedServer(mw.Wrap(h))
	in.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	in.srv.Start()
	t.Cleanup(in.srv.Close)
	return in
}

// post sends POST /payments with key and body on a fresh connection and reads the answer.
func (in *instance) post(key, body string) answer {
	in.t.Helper()
	a, err := send(context.Background(), in.srv.URL, key, body)
	require.NoError(in.t, err)
	return a
}

// recorder is servicetest's counting Observer.
type recorder = servicetest.Observer

// answer, send and eventually are servicetest's.
type answer = servicetest.Answer

var (
	send       = servicetest.Send
	eventually = servicetest.Eventually
)

// holdRow claims a key and completes it in tx, a transaction left open, so its row stays
// locked until tx ends: what a service's slow CompleteTx does to other claims of the key.
// The test rolls tx back (or commits it) itself.
func holdRow(t *testing.T, pool *pgxpool.Pool, s *pgstore.Store) (server.Scope, pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: "held"}
	token := server.NewToken()
	cl, err := s.Claim(ctx, sc, token, "fp", time.Minute, time.Hour)
	require.NoError(t, err)
	require.True(t, cl.Claimed)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	require.NoError(t, s.CompleteTx(ctx, tx, server.Hold{Scope: sc, Token: token}, &server.Response{Status: 201}))
	return sc, tx
}
