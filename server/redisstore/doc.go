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
// Each record is one hash at "<Prefix>{<Scope.ID()>}" (Options.Prefix, "idem:" by
// default; Scope.ID is a hex SHA-256, so the key needs no escaping and never names the
// identity, path or key). Its fields:
//
//	st      "p" in progress, "d" done
//	fp      the fingerprint of the claim that created the record
//	tok     the holder's token; once done, the token that completed it
//	lease   when the holder's lease ends, in milliseconds of Redis's TIME (in progress only)
//	status  the stored status code, in decimal (done only)
//	hdr     the stored header fields, binary: for each field its name, its number of
//	        values and each value, every string preceded by its length as a uvarint
//	body    the stored body, raw bytes
//	unrep   server.Response.Unreplayable ("" for a replayable response)
//	rel:T   a token T that Release found nothing for (a key may hold only these): a late
//	        claim with T is refused (server.ReleasedTokenTTL)
//
// The record's expiry is the key's own TTL (PEXPIRE), so Redis forgets an expired record
// by itself and a key that exists is a live record: max(ttl, lease) from the claim, never
// less than the lease after a renewal or take-over, and ttl from the completion.
//
// # The scripts' contract
//
// Every method is one Lua script (EVALSHA, falling back to EVAL) on that one key, so it
// runs atomically; each reads the time with TIME inside the script, so leases and expiry
// are judged by Redis's clock alone, never a caller's. Reading TIME before writing needs
// scripts replicated by their effects, the only mode since Redis 5: Redis 5 or later (or
// a compatible server such as Valkey) is required.
//
//   - Claim: if the key does not exist, HSET st, fp, tok and lease, PEXPIRE, and answer
//     "claimed"; if it is in progress under the caller's token (a repeat of a claim whose
//     reply was lost), answer "claimed" too; otherwise answer the record's fields, the
//     lease left (lease - now) and PTTL, changing nothing. This is SET NX PX done as one
//     script, so a claim that finds a record also reads it in the same atomic step.
//   - Renew, Complete, Release, TakeOver compare first: unless st is "p" and tok equals
//     the caller's token they return 0, which the Store reports as server.ErrLeaseLost,
//     and change nothing. Renew then sets lease; Complete drops lease, writes st "d" and
//     the response and sets the TTL; Release deletes the key; TakeOver also refuses (0)
//     while lease is after now, and otherwise writes a new tok and lease. Each recognises
//     its own repeat and answers 1 without a change: Complete on a record done under its
//     token, Release on a missing key, TakeOver on a record held under its new token.
//
// Tokens are made by the caller (server.NewToken: 128 random bits) and passed to the
// script: never used before for a Scope, even after its record was released or expired
// (a counter in the record's hash would be deleted with it). Exactly one of concurrent
// take-overs of one token succeeds, since the first one replaces tok.
//
// Durations go to Redis in whole milliseconds, rounded up. Any error from Redis or the
// connection is returned wrapped ("redisstore: claim: ..."), never as ErrLeaseLost, so
// the middleware fails closed (503); a record it cannot decode is an error too.
//
// # Cluster, replicas, persistence
//
// All of a record lives under one key with one hash tag, {<Scope.ID()>}, so every script
// touches one slot and runs on Redis Cluster; records spread over the slots by their
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
