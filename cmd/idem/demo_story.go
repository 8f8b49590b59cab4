// This file tells one payment's story at the end of the demo (demo_report.go),
// from the timeline demo_side.go kept: with idem, a payment whose response was
// lost, whose process was then killed, and which the next process resumed
// with the same key, for the server to replay the same payment; without idem,
// a payment charged twice under two keys. The payment ids come from the
// server (GET /payments?reference=).

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// tellStory prints idem's story and, if plain is not nil, the plain one. If idem charged
// a payment twice, its story is that payment's.
func tellStory(plain, withIdem *side) {
	if ref, evs := withIdem.duplicateStory(); ref != "" {
		fmt.Printf("\na payment charged twice, %s:\n", withIdem.label)
		withIdem.print(ref, evs)
	} else if ref, evs := withIdem.storyOf(); ref != "" {
		fmt.Printf("\none payment's story, %s:\n", withIdem.label)
		withIdem.print(ref, evs)
	}
	if plain == nil {
		return
	}
	if ref, evs := plain.duplicateStory(); ref != "" {
		fmt.Printf("\nthe same kind of payment %s:\n", plain.label)
		plain.print(ref, evs)
	}
}

// storyOf picks the first payment the server charged, whose response was then
// lost (a fault, or with the killed process), and which a later life resumed
// to a replay of the same payment; failing that, one whose lost response was
// answered by a replay in the same life. It returns the reference and its
// timeline with the kills in it.
func (s *side) storyOf() (string, []event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := slices.Sorted(maps.Keys(s.byRef))
	for tier := range 3 {
		for _, ref := range refs {
			evs := s.byRef[ref]
			charged := slices.IndexFunc(evs, func(e event) bool {
				return e.who == "server" && e.what == "new" && (e.fault == "lost" || tier == 1)
			})
			if charged < 0 {
				continue
			}
			for _, e := range evs[charged+1:] {
				replayed := e.who == "worker" && len(e.rest) == 4 && e.rest[3] == "replayed"
				resumed := e.what == "resumed" && s.killBetween(evs[charged].at, e.at)
				if replayed && (resumed || tier == 2) {
					return ref, s.withKills(evs)
				}
			}
		}
	}
	return "", nil
}

// duplicateStory picks the first payment charged twice or more.
func (s *side) duplicateStory() (string, []event) {
	l := s.srv.Ledger()
	dups := l.Duplicates()
	if len(dups) == 0 {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return dups[0], s.withKills(s.byRef[dups[0]])
}

func (s *side) killBetween(from, to time.Duration) bool {
	return slices.ContainsFunc(s.killed, func(k event) bool { return k.at > from && k.at < to })
}

// withKills merges into evs the faults its keys met before processing, and
// the kills and store-link faults (nemesis.go) that fall within it.
func (s *side) withKills(evs []event) []event {
	out := slices.Clone(evs)
	keys := map[string]bool{}
	for _, e := range evs {
		if e.key != "" && !keys[e.key] {
			keys[e.key] = true
			out = append(out, s.byKey[e.key]...)
		}
	}
	slices.SortStableFunc(out, func(a, b event) int { return int(a.at - b.at) })
	evs = out
	out = slices.Clone(evs)
	within := func(at time.Duration) bool { return len(evs) > 0 && at > evs[0].at && at < evs[len(evs)-1].at }
	for _, k := range s.killed {
		if within(k.at) {
			out = append(out, k)
		}
	}
	for _, f := range s.srv.plan {
		if f.applied && within(f.began) {
			out = append(out, event{at: f.began, who: "link", what: fmt.Sprintf("%s for %v", f.what(), f.dur)})
		}
		if f.applied && within(f.healed) {
			out = append(out, event{at: f.healed, who: "link", what: f.what() + ": healed"})
		}
	}
	slices.SortStableFunc(out, func(a, b event) int { return int(a.at - b.at) })
	return out
}

// print prints ref's timeline, one line an event, then its payments.
func (s *side) print(ref string, evs []event) {
	charged := false // the server charged, and no answer has reached the worker since
	for _, e := range evs {
		line := s.describeEvent(e)
		switch {
		case e.who == "server" && e.what == "new":
			charged = true
		case e.who == "worker" && (e.what == "settled" || e.what == "resumed"):
			charged = false
		case e.who == "kill" && charged:
			line = strings.Replace(line, " dies;", " dies before the charge's answer reached it;", 1)
			charged = false
		}
		if line != "" {
			fmt.Printf("  %6.2fs  %s\n", e.at.Seconds(), line)
		}
	}
	ids := s.paymentIDs(ref)
	switch len(ids) {
	case 0:
		fmt.Printf("  the server's ledger: %s has no payment\n", ref)
	case 1:
		fmt.Printf("  the server's ledger: %s has one payment, %s: charged once\n", ref, ids[0])
	default:
		fmt.Printf("  the server's ledger: %s has %d payments, %s: charged %d times\n", ref, len(ids), strings.Join(ids, ", "), len(ids))
	}
}

func (s *side) describeEvent(e event) string {
	switch e.who {
	case "link":
		return e.what
	case "kill":
		if s.plain {
			return fmt.Sprintf("SIGKILL: the process of life %d dies; its file does not show the payment done", e.life)
		}
		return fmt.Sprintf("SIGKILL: the process of life %d dies; the payment stays pending in its journal", e.life)
	case "server":
		key := "key " + short(e.key)
		switch e.what {
		case "new":
			line := "server: new " + key + ": charges the card"
			switch e.fault {
			case "lost":
				line += ", then the response is lost (connection cut)"
			case "slow":
				line += ", answers after the client's timeout"
			case "hold":
				line += ", slowly (held in progress)"
			}
			return line
		case "replay":
			return "server: " + key + " seen before: replays its stored answer, no new charge"
		case "in progress":
			return "server: " + key + " still in progress: 409, retry later"
		case "fault":
			return "server: " + key + ": " + faultBefore(e.fault) + ", before charging"
		}
		return "server: " + key + ": " + e.what
	}
	life := fmt.Sprintf("life %d", e.life)
	switch e.what {
	case "start":
		if s.plain {
			return life + " sends it (each attempt with a fresh key)"
		}
		return life + " journals it with its key, then sends it"
	case "pending":
		return life + ": outcome still unknown after its attempts: stays pending in the journal"
	case "gaveup":
		return life + " gives up after its retries"
	case "settled", "resumed":
		verb := " gets"
		if e.what == "resumed" {
			verb = " resumes it from the journal and gets"
		}
		if len(e.rest) < 4 {
			return life + verb + " " + strings.Join(e.rest, " ")
		}
		line := fmt.Sprintf("%s%s %s, payment %s, key %s", life, verb, e.rest[0], e.rest[1], short(e.rest[2]))
		if e.rest[3] == "replayed" {
			line += " (Idempotent-Replayed)"
		}
		return line
	}
	return ""
}

// short abbreviates an idempotency key for a story line.
func short(key string) string {
	if len(key) > 8 {
		return key[:8] + "…"
	}
	return key
}

// paymentIDs asks the side's servers for the payments made for ref.
func (s *side) paymentIDs(ref string) []string { return s.srv.paymentIDs(ref) }

// faultBefore says in words a fault the server logged as acting before
// processing (testserver's Fault.String): "status 503 Retry-After="2"",
// "drop", "reset".
func faultBefore(f string) string {
	switch {
	case f == "drop":
		return "connection dropped"
	case f == "reset":
		return "connection reset while reading the body"
	case strings.HasPrefix(f, "status "):
		words := strings.TrimPrefix(f, "status ")
		code, ra, _ := strings.Cut(words, " Retry-After=")
		if ra == "" {
			return code
		}
		if strings.HasPrefix(ra, "date+") {
			return code + ", retry after a date " + strings.TrimPrefix(ra, "date+") + " ahead"
		}
		return code + ", retry after " + strings.Trim(ra, `"`) + " s"
	}
	return f
}
