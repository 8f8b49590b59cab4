// This file checks Options (options.go) before any default is filled in: zero
// means a field's default, so only values with no meaning are refused, each
// with ErrInvalidOptions naming the field and its value.

package idem

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// check returns the first field of o that holds a value with no meaning.
func (o *Options) check() error {
	if err := cmp.Or(
		notNegative("MaxBodyBytes", o.MaxBodyBytes),
		notNegative("KeyTTL", o.KeyTTL),
		notNegative("MaxAttempts", o.MaxAttempts),
		notNegative("InitialInterval", o.InitialInterval),
		notNegative("MaxInterval", o.MaxInterval),
		notNegative("MaxRetryAfter", o.MaxRetryAfter),
		notNegative("AttemptTimeout", o.AttemptTimeout),
		notNegative("ResumeConcurrency", o.ResumeConcurrency),
		notNegative("ResumeInterval", o.ResumeInterval),
		notNegative("CloseTimeout", o.CloseTimeout),
	); err != nil {
		return err
	}
	// Written so that NaN fails too: every comparison with NaN is false.
	if m := o.Multiplier; m != 0 && !(m >= 1 && !math.IsInf(m, 1)) {
		return fmt.Errorf("%w: Multiplier %v is not a finite number >= 1", ErrInvalidOptions, m)
	}
	if f := o.RandomizationFactor; !(f >= 0 && f <= 1) {
		return fmt.Errorf("%w: RandomizationFactor %v is outside [0, 1]", ErrInvalidOptions, f)
	}
	// Both would be silently unused: Backoff replaces the schedule they shape.
	if o.Backoff != nil && (o.Multiplier != 0 || o.RandomizationFactor != 0) {
		return fmt.Errorf("%w: Backoff replaces the exponential backoff: Multiplier %v and RandomizationFactor %v must be zero",
			ErrInvalidOptions, o.Multiplier, o.RandomizationFactor)
	}
	// An empty name would match the empty parts of a query ("a=1&&b=2"),
	// which no PrepareResume can put back: the operation could never resume.
	if slices.Contains(o.SensitiveQueryParams, "") {
		return fmt.Errorf("%w: SensitiveQueryParams holds an empty name", ErrInvalidOptions)
	}
	// net/http refuses such a header on every attempt, after the write-ahead:
	// each journaled call would stay pending for good.
	if o.KeyHeader != "" && !isToken(o.KeyHeader) {
		return fmt.Errorf("%w: KeyHeader %q is not a valid header name", ErrInvalidOptions, o.KeyHeader)
	}
	return nil
}

func notNegative[T int | int64 | time.Duration](field string, v T) error {
	if v < 0 {
		return fmt.Errorf("%w: %s %v is negative", ErrInvalidOptions, field, v)
	}
	return nil
}
