package mlx5

import "github.com/purerdma/rdma/mmio"

// readBarrier orders the owner-bit load of a CQE before the loads of the
// rest of it (rdma-core's udma_from_device_barrier after get_sw_cqe). The
// CQ reads ordinary memory the device writes by DMA, so it needs no hook
// for tests.
func readBarrier() { mmio.ReadBarrier() }
