// errors.go holds the package's exported errors, in one block. Fenced refusals are
// server.ErrLeaseLost itself, as the server.Store contract asks.

package redisstore

import "errors"

var (
	// ErrNoClient is returned by Open when the client is nil (or a nil pointer such as a
	// nil *redis.Client): the Store never dials Redis itself, the service hands it the
	// client it already has.
	ErrNoClient = errors.New("redisstore: nil Redis client")

	// ErrInvalidOptions is wrapped by Open's error for an option it cannot use:
	// Options.Prefix holding '{' or '}' (the record's hash tag must be the only one in its
	// key, or Redis Cluster would hash the prefix's tag instead and the key layout would
	// lose its meaning).
	ErrInvalidOptions = errors.New("redisstore: invalid options")

	// ErrNoContextTimeout is returned by Open for a *redis.Client, *redis.ClusterClient or
	// *redis.Ring whose options leave ContextTimeoutEnabled false: go-redis then ignores a
	// context's deadline on an open connection and waits out its ReadTimeout (3 s by
	// default) instead, so the middleware's StoreTimeout (server.Options) would not bound
	// a call to a Store cut off by a partition. Set ContextTimeoutEnabled: true.
	ErrNoContextTimeout = errors.New("redisstore: the client's options must set ContextTimeoutEnabled, so that a context's deadline bounds every call")
)
