// errors.go declares the package's exported errors.

package testserver

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalidPlan is returned (wrapped, with the offending item) by ParsePlan when the
	// fault mix spec cannot be parsed.
	ErrInvalidPlan = errors.New("testserver: invalid fault plan")

	// ErrNotExactlyOnce is returned (wrapped in a *CheckError) by Ledger.Check when some
	// reference has no effect or more than one.
	ErrNotExactlyOnce = errors.New("testserver: not exactly once")
)

// CheckError is the error Ledger.Check returns. It unwraps to ErrNotExactlyOnce.
type CheckError struct {
	// Missing lists the expected references with no effect, sorted.
	Missing []string
	// Duplicated lists the references with two or more effects, sorted.
	Duplicated []string
}

// Error lists the missing and duplicated references.
func (e *CheckError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d missing (%s)", len(e.Missing), abbreviate(e.Missing)))
	}
	if len(e.Duplicated) > 0 {
		parts = append(parts, fmt.Sprintf("%d duplicated (%s)", len(e.Duplicated), abbreviate(e.Duplicated)))
	}
	return ErrNotExactlyOnce.Error() + ": " + strings.Join(parts, ", ")
}

// Unwrap returns ErrNotExactlyOnce.
func (e *CheckError) Unwrap() error { return ErrNotExactlyOnce }

// abbreviate joins up to five names, so a failing run of thousands stays readable.
func abbreviate(names []string) string {
	const max = 5
	if len(names) <= max {
		return strings.Join(names, " ")
	}
	return strings.Join(names[:max], " ") + fmt.Sprintf(" and %d more", len(names)-max)
}
