// Package journaltest is the conformance suite every journal.Store must
// pass, in the spirit of testing/fstest.TestFS: a Store's own tests call
// Run with a function that opens a fresh, empty Store, and Run checks the
// contract journal.Store documents, one subtest per rule.
//
//	func TestConformance(t *testing.T) {
//		journaltest.Run(t, journaltest.Config{
//			Open: func(t *testing.T) journal.Store { return memjournal.New(nil) },
//		})
//	}
//
// What only some Stores can show is optional: durability across a reopen
// (Config.Reopen), damaged storage (Config.Damage), pruning (a Store
// that implements Pruner), sealing under a seal.Keyring (Config.Seal,
// and Config.Raw to look at the storage's bytes), and listing every record
// (a journal.Lister).
//
// The suite writes records as the Transport does: through journal.Apply,
// with a BodySHA256 that is the hash of the body (journal.BodySum), and with
// times at microsecond precision, the finest a Store must keep (PostgreSQL's
// timestamptz keeps no more). It never sleeps: waits end on channels, and
// old records are dated in the past rather than aged.
package journaltest
