// This file holds opSet, the run's tally of the operations seen settled: a
// bit for each payment the workers number (opID), so that a soak's record of
// every payment it made costs a bit, not a map entry holding the worker's
// whole line; an ID of another shape goes in a map.

package main

import (
	"strconv"
	"strings"
)

// maxOpBit bounds the numbers kept as bits: 2^26 payments is 8 MiB of bits.
const maxOpBit = 1 << 26

// opSet is a set of operation IDs. Its zero value is empty and ready.
type opSet struct {
	bits  []uint64
	other map[string]bool
	n     int
}

// opNumber is i for an ID opID(i) gives, spelled exactly so.
func opNumber(op string) (int, bool) {
	digits, ok1 := strings.CutPrefix(op, "order-")
	digits, ok2 := strings.CutSuffix(digits, "/charge")
	if !ok1 || !ok2 {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || opID(i) != op {
		return 0, false
	}
	return i, true
}

// add puts op in the set.
func (s *opSet) add(op string) {
	i, ok := opNumber(op)
	if !ok || i >= maxOpBit {
		if s.other == nil {
			s.other = map[string]bool{}
		}
		if !s.other[op] {
			s.other[strings.Clone(op)] = true // not the line op was cut from
			s.n++
		}
		return
	}
	for len(s.bits) <= i/64 {
		s.bits = append(s.bits, 0)
	}
	if bit := uint64(1) << (i % 64); s.bits[i/64]&bit == 0 {
		s.bits[i/64] |= bit
		s.n++
	}
}

// has reports whether op is in the set.
func (s *opSet) has(op string) bool {
	if i, ok := opNumber(op); ok && i < maxOpBit {
		return i/64 < len(s.bits) && s.bits[i/64]&(1<<(i%64)) != 0
	}
	return s.other[op]
}

// len is how many operations the set holds.
func (s *opSet) len() int { return s.n }
