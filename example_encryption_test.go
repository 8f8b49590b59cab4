package idem_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
)

// Seal what the journal keeps of each request with AES-256-GCM, then rotate
// the key: records written under the old key still read, new ones use the
// new key. An API token in the query is kept out of the file altogether and
// put back by PrepareResume.
func ExampleKeyring() {
	srv := testserver.NewServer(nil)
	defer srv.Close()
	path, cleanup := journalPath()
	defer cleanup()
	newKey := func() []byte {
		k := make([]byte, boltjournal.KeySize) // in production: from your secret store
		rand.Read(k)
		return k
	}
	opts := &idem.Options{
		SensitiveQueryParams: []string{"api_key"},
		PrepareResume: func(r *http.Request) error {
			r.URL.RawQuery += "&api_key=ak_123" // the journal never kept it
			return nil
		},
		Journal: boltjournal.Options{Encryption: &boltjournal.Keyring{Current: "2026-03", Keys: map[string][]byte{"2026-03": newKey()}}},
	}
	pay := func(c *idem.Client, op string) {
		ctx := idem.WithOperationID(context.Background(), op)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments?v=2&api_key=ak_123",
			strings.NewReader(`{"amount":1250,"currency":"eur","reference":"`+op+`","card":"4111111111111111"}`))
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}

	c, err := idem.Open(path, opts)
	if err != nil {
		log.Fatal(err)
	}
	pay(c, "order-1")
	c.Close()

	// Rotation: a new Current key; the old one stays to read older records.
	opts.Journal.Encryption.Keys["2026-04"] = newKey()
	opts.Journal.Encryption.Current = "2026-04"
	c, err = idem.Open(path, opts)
	if err != nil {
		log.Fatal(err)
	}
	pay(c, "order-2")
	for _, op := range []string{"order-1", "order-2"} {
		rec, err := c.Journal().Lookup(op)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(op, rec.State, "key", rec.EncryptionKeyID, rec.URL[len(srv.URL):])
	}
	c.Close()

	raw, _ := os.ReadFile(path)
	fmt.Println("card number in the file:", bytes.Contains(raw, []byte("4111111111111111")))
	fmt.Println("API key in the file:", bytes.Contains(raw, []byte("ak_123")))
	// Output:
	// order-1 settled key 2026-03 /payments?v=2
	// order-2 settled key 2026-04 /payments?v=2
	// card number in the file: false
	// API key in the file: false
}
