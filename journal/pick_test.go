package journal_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/memjournal"
)

// Over a Store that is not a Picker, Picked asks pick about each record
// once built, by its target (its Location once it has one), and skips and
// stops as pick says.
func TestPickedOverPending(t *testing.T) {
	ctx := context.Background()
	s := memjournal.New(nil)
	var seqs []uint64
	for i := range 6 {
		rec := &journal.Record{Key: fmt.Sprint("k", i), Method: http.MethodPost,
			URL: fmt.Sprintf("https://%c.test/p", 'a'+i%2), State: journal.StatePending, Created: time.Now()}
		if i == 4 {
			rec.Location = "https://c.test/moved"
		}
		rec.BodySHA256 = journal.BodySum(nil)
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, journal.RefOf(rec).Seq)
	}
	var asked, yielded []string
	for rec, err := range journal.Picked(ctx, s, seqs[0], func(seq uint64, target []byte) journal.Pick {
		asked = append(asked, string(target))
		switch {
		case seq == seqs[5]:
			return journal.Stop
		case string(target) == "https://b.test/p":
			return journal.Skip
		}
		return journal.Take
	}) {
		if err != nil {
			t.Fatal(err)
		}
		yielded = append(yielded, rec.Key)
	}
	want := []string{"https://b.test/p", "https://a.test/p", "https://b.test/p", "https://c.test/moved", "https://b.test/p"}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("asked about %q, want %q", asked, want)
	}
	if fmt.Sprint(yielded) != "[k2 k4]" {
		t.Errorf("yielded %q, want k2 and k4", yielded)
	}
}
