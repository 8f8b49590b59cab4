// example_test.go shows a handler that completes its idempotency record in its own
// transaction (compiled, not run: it needs a database).

package pgstore_test

import (
	"context"
	"log"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/pgstore"
)

func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.Open(ctx, pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	mw, err := server.New(&server.Options{Store: store})
	if err != nil {
		log.Fatal(err)
	}
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hold, _ := server.HoldFrom(r.Context())
		tx, err := pool.Begin(r.Context())
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // 5xx: the key is released
			return
		}
		defer tx.Rollback(r.Context())
		var id int64
		if err := tx.QueryRow(r.Context(), `INSERT INTO payments (amount) VALUES (100) RETURNING id`).Scan(&id); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		resp := paymentResponse(id, payment{Amount: 100})
		if err := store.CompleteTx(r.Context(), tx, hold, resp); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // rolled back by the defer
			return
		}
		if err := tx.Commit(r.Context()); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		write(w, resp) // what every retry replays
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mw.Wrap(pay)))
}
