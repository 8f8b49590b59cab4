// Package journalhttp serves a read-only view of a journal in use, for
// operators: its operations, pending first, when each is next due, and
// counts by state, as `idem journal ls` and `idem journal stats` print them
// for a file. A running service holds its bbolt journal's file lock, so no
// other process can open the file; the view reads through the service's own
// open journal.Store instead, and works the same on a PostgreSQL journal
// (journal/pgjournal).
//
// The service mounts it on its own mux, as it would net/http/pprof or
// expvar, where only operators reach (it shows idempotency keys and
// operation IDs):
//
//	mux.Handle("/debug/idem/journal", journalhttp.Handler(j, nil))
//
// An operator reads it with a browser or curl (plain text), with
// ?format=json, or with the command, which prints what it prints for a
// file:
//
//	idem journal ls http://127.0.0.1:6060/debug/idem/journal
//	idem journal stats http://127.0.0.1:6060/debug/idem/journal
//
// # Read-only
//
// GET and HEAD are served; any other method is answered 405 Method Not
// Allowed, with nothing read. The query parameters only choose what is
// shown: format (text or json), state (pending,settled,expired,failed,
// comma-separated), op (an operation ID, or a prefix followed by '*') and
// limit (at most Options.Limit); any other is 400 Bad Request. The view
// reads through journal.Lister's All, which takes no claim or lease and
// commits nothing; a Store that is not a journal.Lister is read through
// Pending, and only its pending operations are shown (View.Partial).
//
// # What it never shows
//
// Of each operation the view shows what a sealed record leaves readable to
// someone without its keys (see boltjournal's Options.Encryption): key,
// operation ID, method, the URL's scheme, host and path, state, attempts,
// status, times, the last error as the Transport recorded it (its URL's
// query and sensitive header values masked), and the names, never the
// values, of the headers and query parameters idem did not journal. It
// never shows a body, a header value, the URL's query (cut, and marked
// "?…"), the body's hash, the identity or credential tag an operation is
// bound to, or its representation headers, whether the record is sealed
// or not: the view gives nobody more than the journal file gives someone
// without its keys.
package journalhttp
