// example_test.go: adopting the middleware in a few lines.

package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
)

func Example() {
	payments := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", func(w http.ResponseWriter, r *http.Request) {
		payments++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"pay_%d"}`, payments)
	})

	mw, err := server.New(&server.Options{
		Store:    memstore.New(nil), // one process; a fleet uses the Redis or PostgreSQL store
		Identity: func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil },
		Required: true,
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(mw.Wrap(mux))
	defer srv.Close()

	for range 2 { // the second is a retry: same key, same body
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Account", "acct_1")
		req.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s replayed=%q\n", resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"))
	}
	fmt.Println("payments made:", payments)
	// Output:
	// 201 {"id":"pay_1"} replayed=""
	// 201 {"id":"pay_1"} replayed="true"
	// payments made: 1
}
