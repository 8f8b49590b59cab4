// This file lets ls, show and stats read a running service's journal
// through its view (package journalhttp), given as an http:// or https://
// URL where they take a file: a service holds its bbolt journal's file
// lock, so the command cannot open the file while it runs.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/journalhttp"
)

// isView reports whether arg names a journal view rather than a file.
func isView(arg string) bool {
	return strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://")
}

// viewTimeout bounds a view's request: it reads every record's metadata.
const viewTimeout = 30 * time.Second

// maxView bounds how much of a view the command reads.
const maxView = 256 << 20

// fetchView GETs the view arg names as JSON, with the filter in q (state,
// op). Credentials in the URL's userinfo are sent as HTTP basic
// authentication; messages show the URL without its password.
func fetchView(cmd, arg string, q url.Values) (*journalhttp.View, error) {
	u, err := url.Parse(arg)
	if err != nil || u.Host == "" {
		return nil, usageError(cmd, "journal view URL %q: want http://host:port/path", displayName(arg))
	}
	query := u.Query()
	for k, v := range q {
		if len(v) > 0 && v[0] != "" {
			query[k] = v
		}
	}
	query.Set("format", "json")
	u.RawQuery = query.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", displayName(arg), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err // net/http's *url.Error names the URL without its password
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxView))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", displayName(arg), err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		return nil, fmt.Errorf("%s: %s: %.200s", displayName(arg), resp.Status, msg)
	}
	var v journalhttp.View
	if err := json.Unmarshal(body, &v); err != nil || v.Counts == nil {
		return nil, fmt.Errorf("%s: not a journal view (package journalhttp): %v", displayName(arg), err)
	}
	return &v, nil
}

// viewRecords are a view's operations as records, as far as the view shows
// them: no body, headers, query, identity or body hash.
func viewRecords(v *journalhttp.View) []*idem.Record {
	recs := make([]*idem.Record, len(v.Operations))
	for i := range v.Operations {
		recs[i] = v.Operations[i].Record()
	}
	return recs
}

// viewSummary is what stats prints of a view: its counts cover every
// operation, whatever the view lists.
func viewSummary(arg string, v *journalhttp.View) journalSummary {
	s := journalSummary{File: displayName(arg), States: map[string]int{}, NextAttempt: v.NextAttempt.UTC()}
	for _, st := range []idem.State{idem.StatePending, idem.StateSettled, idem.StateExpired, idem.StateFailed} {
		s.States[st.String()] = v.Counts[st.String()]
		s.Total += v.Counts[st.String()]
	}
	if p := v.OldestPending; p != nil {
		s.OldestPending = &pendingSummary{ID: p.ID, OperationID: p.OperationID, Key: p.Key,
			Created: p.Created.UTC(), AgeSeconds: v.Time.Sub(p.Created).Seconds()}
	}
	return s
}

// truncatedNote says on stderr that a view listed fewer operations than
// match, its limit (journalhttp.Options.Limit) reached.
func truncatedNote(cmd string, v *journalhttp.View) {
	if v.Truncated {
		fmt.Fprintf(os.Stderr, "%s: the view lists %d of the %d operations that match (its limit); narrow with -state or -op\n",
			cmd, len(v.Operations), v.Matched)
	}
}
