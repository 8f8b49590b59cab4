module github.com/idem-go/idem/bench

go 1.26

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/idem-go/idem v0.0.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.45.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
)

replace github.com/idem-go/idem => ../
