module github.com/purerdma/rdma

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require golang.org/x/net v0.62.0
