package journal

import "testing"

// BodyMatches tells a body from another, and allocates nothing doing it:
// Resume checks every body it sends.
func TestBodyMatches(t *testing.T) {
	r := &Record{Body: []byte(`{"amount":4200}`)}
	r.BodySHA256 = BodySum(r.Body)
	if !r.BodyMatches() {
		t.Fatal("the body does not match its own sum")
	}
	if n := testing.AllocsPerRun(100, func() { r.BodyMatches() }); n != 0 {
		t.Fatalf("BodyMatches allocates %v times", n)
	}
	r.Body = []byte(`{"amount":4201}`)
	if r.BodyMatches() {
		t.Fatal("another body matches")
	}
}
