// errors.go holds the package's exported errors, in one block.

package server

import "errors"

var (
	// ErrLeaseLost is returned by a Store's Renew, Complete, Release and TakeOver when the
	// token given no longer holds the record: another holder took it over, or it was
	// completed, released or expired. The transition changed nothing. The middleware logs
	// it and reports it to Observer.LeaseLost; it is never a reason to run a handler again.
	ErrLeaseLost = errors.New("server: lease lost: the record is no longer held under this token")

	// ErrLeaseUnconfirmed is the cause (context.Cause) with which a handler's context is
	// cancelled when its holder could not confirm its lease in time: the Store did not
	// answer the renewals (a partition, an outage) until the local deadline, a margin
	// before the lease could end. Another instance may take the record over once the
	// lease ends; the handler must stop its effects. A handler whose lease the Store
	// refused outright sees ErrLeaseLost instead.
	ErrLeaseUnconfirmed = errors.New("server: lease unconfirmed: the store did not confirm the lease in time")

	// ErrNoStore is returned by New when Options.Store is nil: without shared storage there
	// is no atomic claim, so the middleware refuses to start rather than fail per request.
	ErrNoStore = errors.New("server: Options.Store is nil")

	// ErrInvalidOptions is wrapped by New's error for an option out of range (a negative
	// duration or size, an invalid header name or method).
	ErrInvalidOptions = errors.New("server: invalid options")
)
