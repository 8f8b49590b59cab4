//go:build !linux

// This file stands in for evict_linux.go where posix_fadvise is not at hand.

package main

import "errors"

// evict is not available here: the resume figure's cold pass is skipped.
func evict(string) error {
	return errors.New("evicting a file from the page cache is implemented on Linux only")
}
