module github.com/idem-go/idem/tools/release

go 1.26.0

require (
	golang.org/x/exp v0.0.0-20261120182113-8801fbdfac81
	golang.org/x/mod v0.43.0
	golang.org/x/tools v0.53.0
)

require golang.org/x/sync v0.25.0 // indirect
