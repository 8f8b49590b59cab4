module github.com/idem-go/idem/bench

go 1.26.0

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/idem-go/idem v0.1.0
	github.com/idem-go/idem/journal/pgjournal v0.1.0
	github.com/idem-go/idem/server/pgstore v0.1.0
	github.com/idem-go/idem/server/redisstore v0.1.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.48.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace github.com/idem-go/idem => ../

replace github.com/idem-go/idem/journal/pgjournal => ../journal/pgjournal

replace github.com/idem-go/idem/server/pgstore => ../server/pgstore

replace github.com/idem-go/idem/server/redisstore => ../server/redisstore
