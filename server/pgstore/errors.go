// errors.go holds the package's exported errors, in one block.

package pgstore

import "errors"

var (
	// ErrInvalidOptions is wrapped by the error Open and Migrate return for a nil pool or
	// an Options field out of range (a Schema that is not a plain identifier, a negative
	// duration or batch size).
	ErrInvalidOptions = errors.New("pgstore: invalid options")

	// ErrNewerSchema is wrapped by the error Open and Migrate return when the schema was
	// written by a newer version of pgstore: this one refuses to run on tables it does not
	// know, rather than misread them.
	ErrNewerSchema = errors.New("pgstore: the schema is newer than this pgstore")
)
