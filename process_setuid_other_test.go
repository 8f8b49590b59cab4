// setuidNobody where there is no setuid (process_setuid_unix_test.go).

//go:build !unix

package idem

import "errors"

func setuidNobody() error { return errors.ErrUnsupported }
