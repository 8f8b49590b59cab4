// This file holds the crash points: named moments in an operation's life at
// which a test worker process kills itself, to prove that a crash there loses
// and duplicates nothing (crash_test.go). They are test-only: Transport.crashAt
// is unexported and nil outside this package's tests, and a nil hook costs
// one comparison.

package idem

// Crash points, in the order an operation meets them.
const (
	crashWriteAhead     = "write-ahead"     // the write-ahead commit returned; nothing sent yet
	crashRequestWritten = "request-written" // an attempt's request was written; its response not read
	crashResponse       = "response"        // a final response arrived; the settle not written
	crashResume         = "resume"          // Resume re-sent one operation; others may follow
	crashRedirected     = "redirected"      // a 307/308 moved the record, durably; the response not returned
	crashHop            = "hop"             // the hop after a 307/308 arrived; nothing sent for it yet
)

// crash calls the test hook, if any, at a crash point.
func (t *Transport) crash(point string) {
	if t.crashAt != nil {
		t.crashAt(point)
	}
}
