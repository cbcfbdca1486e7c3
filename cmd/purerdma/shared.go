package main

import (
	"context"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
)

// ended is cli.Ended, for the commands still in this package.
func ended(ctx context.Context, err error) error { return cli.Ended(ctx, err) }
