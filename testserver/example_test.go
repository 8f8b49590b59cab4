// example_test.go shows the lost-response scenario end to end, as documentation that runs.

package testserver_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/idem-go/idem/testserver"
)

// A payment whose response is lost: the client cannot tell whether it was made. Retrying
// with the same Idempotency-Key replays the stored result instead of paying twice.
func Example() {
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})

	pay := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments",
			strings.NewReader(`{"amount": 1250, "currency": "eur", "reference": "order-4827"}`))
		req.Header.Set("Idempotency-Key", "7b1f0c52-order-4827")
		return srv.Client().Do(req)
	}

	if _, err := pay(); err != nil {
		fmt.Println("first attempt: no response")
	}
	resp, err := pay()
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("retry:", resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed"))

	ledger := srv.Ledger()
	fmt.Println("payments for order-4827:", ledger.Effects["order-4827"])
	fmt.Println("exactly once:", ledger.Check([]string{"order-4827"}) == nil)
	// Output:
	// first attempt: no response
	// retry: 201 replayed: true
	// payments for order-4827: 1
	// exactly once: true
}
