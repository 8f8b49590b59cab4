// errors.go holds the package's exported errors, in one block. Fenced refusals are
// server.ErrLeaseLost itself, as the server.Store contract asks.

package redisstore

import "errors"

var (
	// ErrNoClient is returned by New when the client is nil (or a nil pointer such as a
	// nil *redis.Client): the Store never dials Redis itself, the service hands it the
	// client it already has.
	ErrNoClient = errors.New("redisstore: nil Redis client")

	// ErrBadPrefix is returned by New when Options.Prefix holds '{' or '}': the record's
	// hash tag must be the only one in its key, or Redis Cluster would hash the prefix's
	// tag instead and the key layout would lose its meaning.
	ErrBadPrefix = errors.New("redisstore: Options.Prefix must not contain '{' or '}'")
)
