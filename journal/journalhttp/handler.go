// This file holds Handler: the methods it serves, the query parameters it
// reads, and the two forms it answers in (text.go, JSON).

package journalhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idem-go/idem/journal"
)

// DefaultLimit is how many operations a view lists at most when
// Options.Limit is 0.
const DefaultLimit = 1000

// Options configure a Handler. The zero value (or nil) works.
type Options struct {
	// Name names the journal in the view: a path, a namespace. "" shows
	// none.
	Name string

	// Limit is the most operations one response lists; the counts always
	// cover all of them. A request may ask for fewer (limit). 0 means
	// DefaultLimit; negative is treated as 0.
	Limit int
}

// Handler returns an http.Handler that serves a read-only view of s: see
// the package documentation for what it shows and never shows, and its
// query parameters. It is safe for concurrent use, as s is. Each request
// reads s afresh, every record's metadata once (not its body), through
// journal.Lister's All when s implements it.
func Handler(s journal.Store, opts *Options) http.Handler {
	h := &handler{store: s, limit: DefaultLimit}
	if opts != nil {
		h.name = opts.Name
		if opts.Limit > 0 {
			h.limit = opts.Limit
		}
	}
	return h
}

type handler struct {
	store journal.Store
	name  string
	limit int
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "journalhttp: the journal view is read-only: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	f, asJSON, err := h.params(r.URL.Query())
	if err != nil {
		http.Error(w, "journalhttp: "+err.Error(), http.StatusBadRequest)
		return
	}
	v, err := read(r.Context(), h.store, h.name, f)
	if err != nil {
		// A Store's error names a path or a schema, never a record's content.
		http.Error(w, "journalhttp: reading the journal: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if asJSON {
		hdr.Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(v)
		return
	}
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	writeText(w, v)
}

// params reads the query: the filter, and whether JSON was asked for.
func (h *handler) params(q url.Values) (f *filter, asJSON bool, err error) {
	f = &filter{limit: h.limit}
	for name, vals := range q {
		v := vals[len(vals)-1]
		switch name {
		case "format":
			switch v {
			case "json":
				asJSON = true
			case "text", "":
			default:
				return nil, false, fmt.Errorf("format %q: want text or json", v)
			}
		case "state":
			if f.states, err = parseStates(v); err != nil {
				return nil, false, err
			}
		case "op":
			f.op = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, false, fmt.Errorf("limit %q: want a positive number", v)
			}
			f.limit = min(n, h.limit)
		default:
			return nil, false, fmt.Errorf("unknown parameter %q: the view reads format, state, op and limit", name)
		}
	}
	return f, asJSON, nil
}

// parseStates reads a comma-separated list of state names.
func parseStates(spec string) (map[journal.State]bool, error) {
	if spec == "" {
		return nil, nil
	}
	set := map[journal.State]bool{}
	for _, name := range strings.Split(spec, ",") {
		st := parseState(strings.ToLower(strings.TrimSpace(name)))
		if st == 0 {
			return nil, fmt.Errorf("state %q: want pending, settled, expired or failed", name)
		}
		set[st] = true
	}
	return set, nil
}
