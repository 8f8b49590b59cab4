// Package memjournal is a journal.Store held in memory: for tests, and for
// a process that accepts losing its pending operations when it exits.
//
// Nothing survives the process, so nothing is resumed after a restart: an
// operation whose outcome was unknown when the process died stays unknown,
// and a call that names it again starts a new one under a new key unless
// the caller chose the key. Where that is not acceptable, use the bbolt
// journal idem opens by default.
//
// It passes the conformance suite in package journaltest.
package memjournal
