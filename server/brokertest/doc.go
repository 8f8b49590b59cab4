// Package brokertest holds the tests of process-once consumers (server/consumer) against
// a real broker, RabbitMQ, with the PostgreSQL store (server/pgstore): a consumer process
// killed before its ack, the broker redelivering to another, and exactly one effect per
// message (scenario S36). A module of its own, so that neither the library nor the stores
// depend on a broker client. It has no code of its own besides its tests.
package brokertest
