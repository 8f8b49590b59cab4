package journalhttp_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/journalhttp"
)

// A service mounts the view of its client's journal on its own debug mux,
// beside net/http/pprof; an operator reads it with curl, or with
// `idem journal ls http://127.0.0.1:6060/debug/idem/journal`.
func ExampleHandler() {
	dir, err := os.MkdirTemp("", "journalhttp-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c, err := idem.Open(filepath.Join(dir, "payments.journal"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	debug := http.NewServeMux()
	debug.Handle("/debug/idem/journal", journalhttp.Handler(c.Journal(), &journalhttp.Options{Name: "payments"}))
	srv := httptest.NewServer(debug) // a service: http.ListenAndServe("127.0.0.1:6060", debug)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/debug/idem/journal?format=json")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var v journalhttp.View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.Journal, v.Counts)

	resp, err = http.Post(srv.URL+"/debug/idem/journal", "text/plain", nil)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// payments map[expired:0 failed:0 pending:0 settled:0]
	// 405 Method Not Allowed
}
