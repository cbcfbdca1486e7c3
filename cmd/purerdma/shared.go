package main

import (
	"context"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
)

// closeErr is cli.CloseErr, for the commands still in this package.
func closeErr(err *error, close func() error) { cli.CloseErr(err, close) }

// ended is cli.Ended, for the commands still in this package.
func ended(ctx context.Context, err error) error { return cli.Ended(ctx, err) }
