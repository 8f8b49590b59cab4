// Package redisstore is the Redis server.Store for the idempotency middleware of package
// github.com/idem-go/idem/server: every instance of a service pointed at one Redis shares
// its claims, leases and stored responses. It lives in a module of its own so that the
// idem module never depends on a Redis client. It takes the service's own go-redis v9
// client (any redis.UniversalClient: single node, Sentinel failover or Cluster) and never
// dials one itself.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.Open(ctx, rdb, nil)
//	if err != nil { ... }
//	mw, err := server.New(&server.Options{Store: store, Identity: accountOf})
//
// # Key layout
//
// Each record is one string at "<Prefix>{<Scope.ID()>}" (Options.Prefix, "idem:" by
// default; Scope.ID is a hex SHA-256, so the key needs no escaping and never names the
// identity, path or key). Its value starts with the state and the lengths of the
// fingerprint and the token (decimal), then both, then a tail:
//
//	in progress  "p:<len fp>:<len tok>:" fp tok off
//	done         "d:<len fp>:<len tok>:" fp tok "<status>:<len hdr>:<len unrep>:" hdr unrep body
//	released     "r"
//
// off is the milliseconds between the lease's end and the key's expiry, so the lease left
// is PTTL - off on Redis's clock, read with no TIME; tok is the holder's token, and once
// done the token that completed it; hdr holds the stored header fields, binary (for each
// field its name, its number of values and each value, every string preceded by its
// length as a uvarint); unrep is server.Response.Unreplayable. "r" marks a key whose
// tokens Release remembers, in a set at "<Prefix>{<Scope.ID()>}:rel" (same hash slot)
// that lives as long as the marker: a late claim with one of them is refused
// (server.ReleasedTokenTTL).
//
// The record's expiry is the key's own TTL, so Redis forgets an expired record by itself
// and a key that exists is a live record: max(ttl, lease) from the claim, never less than
// the lease after a renewal or take-over, and ttl from the completion.
//
// # Commands and scripts
//
// A fresh claim is one SET NX PX with the value in progress: no script, the one command a
// request's claim costs when its key is new. Everything else is one Lua script (EVALSHA,
// falling back to EVAL) on the record's key and its released tokens' key, so it runs
// atomically; none reads TIME, since leases are offsets from the key's expiry, so leases
// and expiry are judged by Redis's clock alone, never a caller's. Redis 5 or later (or a
// compatible server such as Valkey) is required.
//
//   - Claim: when SET NX finds the key taken, the claim script reads it: where there is
//     no record (it expired since) or only the released marker, it creates the record
//     unless the token is in the released set (refused); a record in progress under the
//     caller's token is a repeat of a claim whose reply was lost, answered "claimed"; any
//     other record is returned with its PTTL, unchanged.
//   - Renew, Complete, Release, TakeOver compare first: unless the record is in progress
//     under the caller's token they return 0, which the Store reports as
//     server.ErrLeaseLost, and change nothing. Renew then rewrites off; Complete writes
//     the done value and the TTL; Release adds the token to the released set and leaves
//     the marker; TakeOver also refuses (0) while the lease has time left (PTTL - off >
//     0), and otherwise writes the new token and off. Each recognises its own repeat and
//     answers 1 without a change: Complete on a record done under its token, Release on a
//     missing key or the marker, TakeOver on a record held under its new token.
//
// Tokens are made by the caller (server.NewToken: 128 random bits) and passed to the
// script: never used before for a Scope, even after its record was released or expired.
// Exactly one of concurrent take-overs of one token succeeds, since the first one
// replaces the token.
//
// Durations go to Redis in whole milliseconds, rounded up. Any error from Redis or the
// connection is returned wrapped ("redisstore: claim: ..."), never as ErrLeaseLost, so
// the middleware fails closed (503); a record it cannot decode is an error too.
//
// # Rolling upgrade
//
// Versions before this layout kept each record as a hash (fields st, fp, tok, lease as
// milliseconds of Redis's TIME, status, hdr, body, unrep, and rel:<token>). Every script
// here recognises such a key and runs the previous version's logic on it, so records
// written before an upgrade are replayed, renewed, taken over, completed and released as
// they were. The reverse does not hold: an instance still on a previous version fails
// closed (503, handler not run) on a key written by this one, whose type it cannot read,
// until it is upgraded too.
//
// # Cluster, replicas, persistence
//
// All of a record lives under one hash tag, {<Scope.ID()>} (its key and its released
// tokens' key), so every command and script touches one slot and runs on Redis Cluster; records spread over the slots by their
// Scope. Options.Prefix must not hold a brace, or it would become the hash tag. The
// tests run the conformance suite on a three-master cluster of their own through a
// redis.ClusterClient.
//
// The Store is as durable as the Redis it runs on. Redis replication is asynchronous: if
// the primary fails over before a claim reached its replica, the new primary has no
// record and a retry runs the handler again; use WAIT, or Redis persistence and no
// failover, where that matters. Likewise a Redis restarted without persistence forgets
// every key. A Redis that evicts keys under memory pressure (any maxmemory-policy but
// noeviction; the records all have a TTL, so volatile-* policies pick them too) may drop
// a live record, and its key then runs again: keep them on a Redis with noeviction.
//
// A Store is safe for concurrent use by many goroutines and processes.
package redisstore
