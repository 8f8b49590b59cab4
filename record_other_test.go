// record_unix_test.go's counterpart where there is no RLIMIT_FSIZE.

//go:build !unix

package idem

import "errors"

func limitFileSize(int64) error { return errors.ErrUnsupported }
