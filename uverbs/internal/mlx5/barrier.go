package mlx5

import "github.com/purerdma/rdma/mmio"

// readBarrier orders the owner-bit load of a CQE before the loads of the
// rest of it (rdma-core's udma_from_device_barrier after get_sw_cqe). The
// CQ reads ordinary memory the device writes by DMA, so it needs no hook
// for tests.
func readBarrier() { mmio.ReadBarrier() }

// fromDevice orders the loads of the CQE b after its owner byte, which
// CQ.peek found software's: an acquire load of the CQE's last word (its
// op_own byte again), then what mmio.AcquireBarrier does, which is
// nothing on amd64 (x86 keeps loads from write-back memory in order; the
// acquire load keeps the compiler from moving later loads before it,
// where libmlx5 issues LFENCE) and a read barrier elsewhere
// (docs/providers.md). mmio.AcquireWord does both in one inlined call;
// ProvCQ.Poll calls it directly.
func fromDevice(b *[CQESize]byte) { mmio.AcquireWord((*[4]byte)(b[CQESize-4:])) }
