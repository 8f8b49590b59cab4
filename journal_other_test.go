// journal_linux_test.go's counterpart where the tests cannot mount.

//go:build !linux

package idem

import (
	"errors"
	"testing"
)

func mountTmpfs(testing.TB, string, int) error { return errors.ErrUnsupported }
func remountReadOnly(string) error             { return errors.ErrUnsupported }
