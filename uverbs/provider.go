package uverbs

import (
	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs/internal/mlx5"
	"github.com/purerdma/rdma/uverbs/internal/provider"
	"github.com/purerdma/rdma/uverbs/internal/rxe"
	"github.com/purerdma/rdma/uverbs/internal/siw"
)

// The providers, one package per driver, behind the interface of
// uverbs/internal/provider (docs/providers.md): newProvider picks one
// from the kernel's driver id when a context opens, and hands it the
// provider layer's context (c.pc). The seam runs one way: uverbs calls
// the providers; they call nothing of uverbs.
func newProvider(c *Context) provider.Provider {
	switch c.driverID {
	case abi.RDMA_DRIVER_RXE:
		return rxe.New(c.pc)
	case abi.RDMA_DRIVER_MLX5:
		return mlx5.NewProvider(c.pc)
	case abi.RDMA_DRIVER_SIW:
		return siw.New(c.pc)
	}
	return provider.Unsupported{Driver: c.dev.DriverName, ID: c.driverID}
}

// The views providers take of the public work requests and completions
// (provider.As; TestProviderViews checks the layouts).
func sendWRView(wr *SendWR) *provider.SendWR { return provider.As[provider.SendWR](wr) }
func recvWRView(wr *RecvWR) *provider.RecvWR { return provider.As[provider.RecvWR](wr) }
func wcView(wc []WorkCompletion) []provider.WC {
	return provider.SliceAs[provider.WC](wc)
}
