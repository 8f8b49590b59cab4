// setuidNobody where there is no setuid (process_setuid_unix_test.go).

//go:build !unix

package boltjournal

import "errors"

const nobody = 65534

func setuidNobody() error { return errors.ErrUnsupported }
