// queries.go holds every SQL statement the Store runs, built once per schema at Open. All
// times are the database's clock_timestamp() (the time of the statement, not of its
// transaction's start, which is what now() reads: a completion inside a long transaction
// must judge the lease as it stands when it runs); durations travel as whole microseconds
// ($n::bigint) and come back the same way.

package pgstore

// queries are the Store's statements for one schema.
type queries struct {
	claim, find, dropExpired           string
	renew, complete, release, takeOver string
	own, remember, released            string
	timeouts                           string
	stashTimeouts, restoreTimeouts     string
	prune, pruneReleased               string
}

// micro turns a bigint parameter of microseconds into an interval.
const micro = `::bigint * interval '1 microsecond'`

// now is the database's clock when the statement reads it.
const now = `clock_timestamp()`

// left is a column's distance from now in microseconds (0 for NULL).
func left(col string) string {
	return `coalesce((extract(epoch FROM ` + col + ` - ` + now + `) * 1000000)::bigint, 0)`
}

// newQueries returns the statements for schema, an identifier already quoted.
func newQueries(schema string) queries {
	t := schema + `.server_records`
	rel := schema + `.server_released`
	live := ` AND expires_at > ` + now
	// A row is in progress while it has a lease; a done row keeps the token that completed
	// it, so that a repeated completion is recognised.
	held := ` AND lease_until IS NOT NULL`
	cols := `lease_until IS NOT NULL, fingerprint, ` + left("lease_until") + `, ` + left("expires_at") + `, status, header, body, unreplayable`
	q := queries{
		// The claim changes one row if it made the record; none if the key is taken (find
		// then reads the row) or the token was released before this claim arrived.
		claim: `INSERT INTO ` + t + ` (scope, fingerprint, token, lease_until, expires_at, prune_from)
	SELECT $1, $2, $5, ` + now + ` + $3` + micro + `, ` + now + ` + greatest($3, $4)` + micro + `, ` + now + ` + greatest($3, $4)` + micro + `
	WHERE NOT EXISTS (SELECT FROM ` + rel + ` WHERE scope = $1 AND token = $5 AND expires_at > ` + now + `)
	ON CONFLICT (scope) DO NOTHING`,
		find:        `SELECT token, ` + cols + ` FROM ` + t + ` WHERE scope = $1`,
		dropExpired: `DELETE FROM ` + t + ` WHERE scope = $1 AND expires_at <= ` + now,
		// The fenced transitions: each changes the row only while token $2 holds it in
		// progress and it has not expired.
		renew: `UPDATE ` + t + ` SET lease_until = ` + now + ` + $3` + micro + `,
	expires_at = greatest(expires_at, ` + now + ` + $3` + micro + `)
WHERE scope = $1 AND token = $2` + held + live,
		complete: `UPDATE ` + t + ` SET lease_until = NULL, expires_at = ` + now + ` + $3` + micro + `,
	status = $4, header = $5, body = $6, unreplayable = $7
WHERE scope = $1 AND token = $2` + held + live,
		// The row goes, and its token is kept, so that a claim with it arriving late is refused.
		release: `WITH gone AS (DELETE FROM ` + t + ` WHERE scope = $1 AND token = $2` + held + live + ` RETURNING scope)
INSERT INTO ` + rel + ` (scope, token, expires_at) SELECT scope, $2, ` + now + ` + $3` + micro + ` FROM gone
ON CONFLICT (scope, token) DO UPDATE SET expires_at = greatest(` + rel + `.expires_at, EXCLUDED.expires_at)`,
		// lease_until <= now: a lease with nothing left has lapsed (server.Record.LeaseLeft).
		takeOver: `UPDATE ` + t + ` SET token = $4, lease_until = ` + now + ` + $3` + micro + `,
	expires_at = greatest(expires_at, ` + now + ` + $3` + micro + `)
WHERE scope = $1 AND token = $2 AND lease_until <= ` + now + live,
		// own tells a refused transition whether it had been made already (a repeat whose
		// first reply was lost): the live row's token is $2, and whether it is in progress.
		own: `SELECT token = $2, lease_until IS NOT NULL FROM ` + t + ` WHERE scope = $1` + live,
		// A token Release found nothing for, kept so that a late claim with it is refused.
		remember: `INSERT INTO ` + rel + ` (scope, token, expires_at) VALUES ($1, $2, ` + now + ` + $3` + micro + `)
	ON CONFLICT (scope, token) DO UPDATE SET expires_at = greatest(` + rel + `.expires_at, EXCLUDED.expires_at)`,
		released:      `SELECT EXISTS (SELECT FROM ` + rel + ` WHERE scope = $1 AND token = $2 AND expires_at > ` + now + `)`,
		pruneReleased: `DELETE FROM ` + rel + ` WHERE expires_at <= ` + now,
		// timeouts bound the statement sent after it in the same implicit transaction (one
		// round trip, a pgx batch): SET LOCAL values end with that transaction.
		timeouts: `SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $1, true)`,
		// OneCommit's claim runs in a transaction the handler goes on using: the
		// transaction's own timeouts are kept aside (left to right, as PostgreSQL
		// evaluates a select list) before the claim's are set, and set back after it, in
		// the same round trip.
		stashTimeouts: `SELECT set_config('idem.lock_timeout', current_setting('lock_timeout'), true),
	set_config('idem.statement_timeout', current_setting('statement_timeout'), true),
	set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)`,
		restoreTimeouts: `SELECT set_config('lock_timeout', current_setting('idem.lock_timeout'), true),
	set_config('statement_timeout', current_setting('idem.statement_timeout'), true)`,
		// One batch of expired rows, found through the index on prune_from (the claim's
		// expiry: a handler's time before expires_at, or after it only for a TTL shorter than the lease), oldest
		// first; rows another transaction holds (a claim replacing one) are skipped, not
		// waited for.
		prune: `DELETE FROM ` + t + ` WHERE scope IN (
	SELECT scope FROM ` + t + ` WHERE prune_from <= ` + now + ` AND expires_at <= ` + now + `
	ORDER BY prune_from LIMIT $1 FOR UPDATE SKIP LOCKED)`,
	}
	return q
}
