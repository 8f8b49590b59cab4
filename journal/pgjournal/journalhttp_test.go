// The operator's view (package journalhttp) over a PostgreSQL journal in
// use: it shows the namespace's every operation, those another instance
// leases included, never a body or a credential, and changes no row.

package pgjournal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/journalhttp"
	"github.com/idem-go/idem/testserver"
)

// viewSecrets are what the view must never show.
var viewSecrets = []string{"SECRET-BODY-4111", "SECRET-AUTH-TOKEN", "SECRET-QUERY-API-KEY", "SECRET-QUERY-PLAIN",
	"SECRET-HEADER-VALUE", "SECRET-TENANT"}

// rows returns the namespace's rows as text, leases' expiry aside (the
// heartbeat renews them), and its namespaces row: equal texts mean no
// change.
func rows(t *testing.T, j *Journal) string {
	t.Helper()
	rs, err := j.pool.Query(bg, j.sql(`SELECT seq, epoch, key, state, record::text, encode(body, 'hex'), updated, holder
		FROM {s}.operations WHERE namespace = $1 ORDER BY seq`), j.opts.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals...)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	var ns string
	if err := j.pool.QueryRow(bg, j.sql(`SELECT string_agg(namespace || ' ' || encode(identity_key, 'hex') || ' ' ||
		coalesce(latest_written::text, ''), ',') FROM {s}.namespaces`)).Scan(&ns); err != nil {
		t.Fatal(err)
	}
	return b.String() + ns
}

// viewGet sends method to the view and returns its status, its raw bytes
// and its body.
func viewGet(t *testing.T, url, method string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"state":"settled"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := httputil.DumpResponse(resp, true)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	for _, s := range viewSecrets {
		if strings.Contains(string(raw), s) {
			t.Fatalf("%s %s shows %q:\n%s", method, url, s, raw)
		}
	}
	return resp.StatusCode, string(raw), body
}

func TestJournalViewOnPostgres(t *testing.T) {
	pool := testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t)}
	a, b := openTest(t, pool, opts), openTest(t, pool, opts)
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Script(testserver.Fault{}, testserver.Fault{Kind: testserver.FaultStatus, Status: 503, RetryAfter: "30"})
	tr, err := idem.NewTransport(a, &idem.Options{MaxAttempts: 1, SensitiveQueryParams: []string{"api_key"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"order-1/settled", "order-2/pending"} {
		ctx := idem.WithIdentity(idem.WithOperationID(context.Background(), op), "SECRET-TENANT")
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments?api_key=SECRET-QUERY-API-KEY&ref=SECRET-QUERY-PLAIN",
			strings.NewReader(`{"amount":5,"currency":"eur","reference":"`+op+`","card":"SECRET-BODY-4111"}`))
		req.Header.Set("Authorization", "Bearer SECRET-AUTH-TOKEN")
		req.Header.Set("X-Api-Key", "SECRET-HEADER-VALUE")
		if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
			resp.Body.Close()
		}
	}
	claimCreate(t, b, pendingRec(t, "order-3/leased-by-b")) // in flight at another instance

	mux := http.NewServeMux()
	mux.Handle("/debug/idem/journal", journalhttp.Handler(a, &journalhttp.Options{Name: opts.Namespace}))
	view := httptest.NewServer(mux)
	t.Cleanup(view.Close)
	url := view.URL + "/debug/idem/journal"
	before := rows(t, a)
	// The service's journal holds what the view leaves out.
	if rec, err := a.Get(bg, journal.Name{OperationID: "order-2/pending"}); err != nil || rec == nil ||
		rec.Header.Get("X-Api-Key") != "SECRET-HEADER-VALUE" || !strings.Contains(string(rec.Body), "SECRET-BODY-4111") {
		t.Fatalf("Get = %+v, %v: want the journaled header and body", rec, err)
	}

	code, raw, body := viewGet(t, url+"?format=json", http.MethodGet)
	if code != http.StatusOK {
		t.Fatalf("GET: %d\n%s", code, raw)
	}
	var v journalhttp.View
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range v.Operations {
		got[e.OperationID] = fmt.Sprintf("%s %d %v %d", e.State, e.Attempts, e.AttemptsUncertain, e.Status)
	}
	want := map[string]string{"order-1/settled": "settled 1 false 201", "order-2/pending": "pending 1 true 503",
		"order-3/leased-by-b": "pending 0 true 0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the view lists %v, want %v", got, want)
	}
	if c := v.Counts; c["pending"] != 2 || c["settled"] != 1 || v.Partial {
		t.Fatalf("counts %v (partial %v), want 2 pending, 1 settled", c, v.Partial)
	}
	if !v.Time.After(time.Now().Add(-time.Minute)) || v.NextAttempt.Before(time.Now().Add(20*time.Second)) {
		t.Fatalf("time %v, next attempt %v: want now, and the Retry-After's 30 s", v.Time, v.NextAttempt)
	}
	if code, raw, _ := viewGet(t, url, http.MethodGet); code != http.StatusOK || !strings.Contains(raw, "3: 2 pending, 1 settled") {
		t.Fatalf("text view: %d\n%s", code, raw)
	}

	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if code, raw, _ := viewGet(t, url+"?state=settled&op=order-2/pending", m); code != http.StatusMethodNotAllowed {
			t.Fatalf("%s: %d, want 405\n%s", m, code, raw)
		}
	}
	if code, _, _ := viewGet(t, url+"?resolve=order-2/pending", http.MethodGet); code != http.StatusBadRequest {
		t.Fatalf("GET ?resolve=: %d, want 400", code)
	}
	if after := rows(t, a); after != before {
		t.Fatalf("the rows changed:\nbefore %s\nafter  %s", before, after)
	}
}
