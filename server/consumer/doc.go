// Package consumer processes each message of a queue once across the consumers that share
// a server.Store, for brokers that deliver at least once (RabbitMQ, Kafka, NATS JetStream,
// SQS redeliver a message whose consumer died before its ack).
//
// Process claims the message's ID in the Store, runs the handler under a renewed lease,
// and marks the message done only after the handler returned: a consumer that marked a
// message before processing it would lose it if processing failed. The Result says what
// to tell the broker:
//
//	Processed   the handler ran now and the message is marked done: ack
//	Duplicate   it was done before (a redelivery): ack without running the handler
//	Busy        another consumer is running it, or one died running it and nothing says
//	            whether its effect happened: do not ack; the broker delivers it again later
//	Failed      the handler returned an error: the claim is released, so the redelivery
//	            runs it again: nack (requeue)
//
// An error from Process means the Store could not answer: nothing is known, do not ack.
//
// # A consumer that died mid-message
//
// Its claim stays in progress until its lease lapses. Process never runs such a message
// again blindly (a consumer killed after its effect and before its done-mark would repeat
// the effect): Options.Recover decides, for instance by looking the effect up by business
// reference. Without Recover the message is Busy until its record expires (Options.TTL).
// When the handler's effects and the done-mark commit in one database transaction (the
// PostgreSQL store's CompleteTx, with HoldFrom and MarkCompleted), a claim whose holder died
// without marking it did nothing: Options.RerunAbandoned then runs the message again once
// the lease has lapsed.
//
// The records are the Store's, scoped Scope{Identity: Options.Group, Method: "MESSAGE",
// Path: queue, Key: message ID}: the same Store may serve the HTTP middleware and several
// consumer groups at once.
package consumer
