// This file holds the view's plain-text form: a summary as `idem journal
// stats` prints it, then the operations as `idem journal ls` lists them.

package journalhttp

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

func writeText(w io.Writer, v *View) {
	if v.Journal != "" {
		fmt.Fprintf(w, "journal        %s\n", v.Journal)
	}
	fmt.Fprintf(w, "read at        %s\n", v.Time.UTC().Format(time.RFC3339))
	c := v.Counts
	if v.Partial {
		fmt.Fprintf(w, "records        %d pending (this journal lists its pending operations only)\n", c["pending"])
	} else {
		fmt.Fprintf(w, "records        %d: %d pending, %d settled, %d expired, %d failed\n",
			c["pending"]+c["settled"]+c["expired"]+c["failed"], c["pending"], c["settled"], c["expired"], c["failed"])
	}
	if p := v.OldestPending; p != nil {
		fmt.Fprintf(w, "oldest pending %s (id %d, key %s), created %s, %s ago\n", orDash(p.OperationID), p.ID, p.Key,
			p.Created.UTC().Format(time.RFC3339), v.Time.Sub(p.Created).Round(time.Second))
	}
	switch {
	case c["pending"] == 0:
	case v.NextAttempt.IsZero():
		fmt.Fprintln(w, "next attempt   now: every pending operation is due")
	default:
		fmt.Fprintf(w, "next attempt   %s\n", v.NextAttempt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tOPERATION\tKEY\tREQUEST\tATTEMPTS\tSTATUS\tCREATED\tNEXT ATTEMPT")
	for _, e := range v.Operations {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s %s\t%s\t%s\t%s\t%s\n", e.ID, e.State, orDash(e.OperationID), e.Key,
			e.Method, e.URL, attempts(&e), orDash(status(e.Status)), e.Created.UTC().Format(time.RFC3339), orDash(next(&e)))
	}
	tw.Flush()
	if v.Truncated {
		fmt.Fprintf(w, "%d of %d record(s) shown: narrow with ?state=, ?op= (a trailing * matches a prefix)\n", len(v.Operations), v.Matched)
	} else {
		fmt.Fprintf(w, "%d record(s)\n", len(v.Operations))
	}
	fmt.Fprintln(w, "\nATTEMPTS: recorded attempts; N+? while the outcome is unknown: a call records its attempts")
	fmt.Fprintln(w, "when it ends, so one in flight, or cut short by a crash, may have reached the server even at 0+?.")
	fmt.Fprintln(w, "JSON: ?format=json. Bodies, header values and URL queries are never shown.")
}

// attempts is the ATTEMPTS column, as `idem journal ls` prints it.
func attempts(e *Entry) string {
	if e.AttemptsUncertain {
		return strconv.Itoa(e.Attempts) + "+?"
	}
	return strconv.Itoa(e.Attempts)
}

func status(s int) string {
	if s == 0 {
		return ""
	}
	return strconv.Itoa(s)
}

func next(e *Entry) string {
	if e.State != "pending" || e.NextAttempt.IsZero() {
		return ""
	}
	return e.NextAttempt.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
