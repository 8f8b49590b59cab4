// This file names the rows of the server tables, the path each is served on
// in the child, and the ratio lines drawn between them with their targets.

package serverbench

// row is one middleware under test, served by the child at path.
type row struct {
	name  string
	path  string
	store string // "" (in memory), "redis" or "pg": the service the row needs
}

// allRows are the rows in the order of the tables.
var allRows = []row{
	{"bare", "/bare", ""},
	{"idem mem", "/idem-mem", ""},
	{"floor mem", "/floor-mem", ""},
	{"contract floor mem", "/contract-floor-mem", ""},
	{"idem redis", "/idem-redis", "redis"},
	{"floor redis", "/floor-redis", "redis"},
	{"contract floor redis", "/contract-floor-redis", "redis"},
	{"idem pg", "/idem-pg", "pg"},
	{"floor pg", "/floor-pg", "pg"},
	{"contract floor pg", "/contract-floor-pg", "pg"},
}

// rowsFor returns the rows a run has: the in-memory ones always, the Redis and
// PostgreSQL ones when their service was named.
func rowsFor(redis, pg bool) []row {
	var out []row
	for _, r := range allRows {
		if r.store == "" || r.store == "redis" && redis || r.store == "pg" && pg {
			out = append(out, r)
		}
	}
	return out
}

// ratioDef is a ratio line: a's req/s ÷ b's, median over rounds of the
// per-round ratio, against a target if it has one.
type ratioDef struct {
	a, b   string
	target string // printed beside the figures; "" for none
}

var ratioDefs = []ratioDef{
	{"idem mem", "floor mem", "≥ 0.9x"},
	{"idem redis", "floor redis", "≥ 0.9x"},
	{"idem pg", "floor pg", "≥ 0.9x"},
	{"idem mem", "bare", "≥ 0.9x at c=64"},
	// Each distance to a floor in two: idem's own work, then the contract's.
	{"idem mem", "contract floor mem", ""},
	{"contract floor mem", "floor mem", ""},
	{"contract floor mem", "bare", ""}, // the contract's share of idem mem ÷ bare
	{"idem redis", "contract floor redis", ""},
	{"contract floor redis", "floor redis", ""},
	{"idem pg", "contract floor pg", ""},
	{"contract floor pg", "floor pg", ""},
}

// rowIndex returns the index of the row named name in rows, or -1.
func rowIndex(rows []row, name string) int {
	for i, r := range rows {
		if r.name == name {
			return i
		}
	}
	return -1
}
