// Package toxitest holds no code of its own: its tests put a real toxiproxy
// server between an idem client and the testserver and check exactly-once on
// the ledger under TCP faults. It is a module of its own so that the library's
// users never download toxiproxy.
package toxitest
