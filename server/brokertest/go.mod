module github.com/idem-go/idem/server/brokertest

go 1.26.0

require (
	github.com/idem-go/idem v0.1.0
	github.com/idem-go/idem/server/pgstore v0.1.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/rabbitmq/amqp091-go v1.16.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/idem-go/idem => ../..
	github.com/idem-go/idem/server/pgstore => ../pgstore
)
