// queries.go holds every SQL statement the Store runs, built once per schema at Open. All
// times are the database's now(); durations travel as whole microseconds ($n::bigint) and
// come back the same way.

package pgstore

// queries are the Store's statements for one schema.
type queries struct {
	claim, find, dropExpired           string
	renew, complete, release, takeOver string
	prune                              string
}

// micro turns a bigint parameter of microseconds into an interval.
const micro = `::bigint * interval '1 microsecond'`

// left is a column's distance from now() in microseconds (0 for NULL).
func left(col string) string {
	return `coalesce((extract(epoch FROM ` + col + ` - now()) * 1000000)::bigint, 0)`
}

// newQueries returns the statements for schema, an identifier already quoted.
func newQueries(schema string) queries {
	t := schema + `.server_records`
	// nextval's argument is a string naming the sequence; schema is a plain identifier
	// (Options.Schema's rule), so it holds no quote to escape.
	token := `nextval('` + schema + `.server_tokens')::text`
	live := ` AND expires_at > now()`
	cols := `fingerprint, ` + left("lease_until") + `, ` + left("expires_at") + `, status, header, body, unreplayable`
	q := queries{
		// The INSERT's RETURNING gives the new token; when it did nothing, the second
		// branch gives the row it ran into (if the statement's snapshot can see it).
		claim: `WITH ins AS (
	INSERT INTO ` + t + ` (scope, fingerprint, token, lease_until, expires_at)
	VALUES ($1, $2, ` + token + `, now() + $3` + micro + `, now() + greatest($3, $4)` + micro + `)
	ON CONFLICT (scope) DO NOTHING
	RETURNING token)
SELECT true, token, '', 0::bigint, 0::bigint, NULL::integer, NULL::bytea, NULL::bytea, NULL::text FROM ins
UNION ALL
SELECT false, token, ` + cols + ` FROM ` + t + ` WHERE scope = $1 AND NOT EXISTS (SELECT FROM ins)`,
		find:        `SELECT false, token, ` + cols + ` FROM ` + t + ` WHERE scope = $1`,
		dropExpired: `DELETE FROM ` + t + ` WHERE scope = $1 AND expires_at <= now()`,
		// The fenced transitions: each changes the row only while token $2 holds it and it
		// has not expired. A done row's token is NULL, so it takes none of them.
		renew: `UPDATE ` + t + ` SET lease_until = now() + $3` + micro + `,
	expires_at = greatest(expires_at, now() + $3` + micro + `)
WHERE scope = $1 AND token = $2` + live,
		complete: `UPDATE ` + t + ` SET token = NULL, lease_until = NULL, expires_at = now() + $3` + micro + `,
	status = $4, header = $5, body = $6, unreplayable = $7
WHERE scope = $1 AND token = $2` + live,
		release: `DELETE FROM ` + t + ` WHERE scope = $1 AND token = $2` + live,
		// lease_until <= now(): a lease with nothing left has lapsed (server.Record.LeaseLeft).
		takeOver: `UPDATE ` + t + ` SET token = ` + token + `, lease_until = now() + $3` + micro + `,
	expires_at = greatest(expires_at, now() + $3` + micro + `)
WHERE scope = $1 AND token = $2 AND lease_until <= now()` + live + `
RETURNING token`,
		// One batch of expired rows, oldest first; rows another transaction holds (a claim
		// replacing one) are skipped, not waited for.
		prune: `DELETE FROM ` + t + ` WHERE scope IN (
	SELECT scope FROM ` + t + ` WHERE expires_at <= now()
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`,
	}
	return q
}
