// example_test.go is the README's adoption example, compiled (not run: it needs a Redis
// and serves forever).

package redisstore_test

import (
	"context"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/redisstore"
)

func Example() {
	mux := http.NewServeMux()
	accountID := func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil }

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true}) // or redis.NewClusterClient
	store, err := redisstore.Open(ctx, rdb, &redisstore.Options{Prefix: "payments:idem:"})      // fails unless Redis answers PING
	if err != nil {
		log.Fatal(err)
	}
	mw, err := server.New(&server.Options{Store: store, Identity: accountID})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(":8080", mw.Wrap(mux)))
}
