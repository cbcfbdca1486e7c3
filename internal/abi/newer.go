//go:build amd64 || arm64

package abi

import "unsafe"

// This file declares by hand what the Linux 6.1 headers the package is
// generated from lack, but later kernels define: RDMA FLUSH and ATOMIC
// WRITE, both merged for Linux 6.2 (rdma for-next, December 2022) and
// unchanged through Linux 6.12. Sources, all in the kernel's
// include/uapi/rdma/:
//
//   - FLUSH in ib_user_verbs.h and ib_user_ioctl_verbs.h: the patch
//     "RDMA: Extend RDMA user ABI to support flush" (Li Zhijian,
//     <20221206130201.30986-2-lizhijian@fujitsu.com>), which adds the
//     enums ib_placement_type and ib_selectivity_level too.
//   - ATOMIC WRITE in ib_user_verbs.h, and atomic_wr in rdma_user_rxe.h:
//     the atomic write series up to kernel commit c2d939002934 ("RDMA/rxe:
//     Extend rxe user ABI to support atomic write"), as rdma-core imported
//     it in d77c0504c ("Update kernel headers").
//   - The flush member of rxe_send_wr.wr in rdma_user_rxe.h: the flush
//     series up to kernel commit 124011e6e933 ("RDMA/rxe: Enable RDMA
//     FLUSH capability for rxe device"), imported by rdma-core in
//     16ac905b1.
//
// Every value and layout was checked against the v6.12 headers (Debian's
// linux-headers-6.12.111+deb12-common, include/uapi/rdma) by generating
// from them. The tests compare this file with the headers of the machine
// whenever those define the same names, and the generator leaves out what
// this file declares, so that regenerating from newer headers does not
// clash with it.

// C: enum ib_uverbs_wr_opcode (include/uapi/rdma/ib_user_verbs.h), Linux 6.2.
const (
	IB_UVERBS_WR_FLUSH        = 14 // "RDMA: Extend RDMA user ABI to support flush"
	IB_UVERBS_WR_ATOMIC_WRITE = 15 // rdma-core d77c0504c, to kernel c2d939002934
)

// C: enum ib_uverbs_wc_opcode (include/uapi/rdma/ib_user_verbs.h), Linux 6.2.
const (
	IB_UVERBS_WC_FLUSH        = 8 // "RDMA: Extend RDMA user ABI to support flush"
	IB_UVERBS_WC_ATOMIC_WRITE = 9 // rdma-core d77c0504c, to kernel c2d939002934
)

// C: enum ib_uverbs_device_cap_flags (include/uapi/rdma/ib_user_verbs.h),
// Linux 6.2: bits of ExQueryDeviceResp.DeviceCapFlagsEx.
const (
	IB_UVERBS_DEVICE_FLUSH_GLOBAL     = 0x4000000000  // 1ULL << 38, "RDMA: Extend RDMA user ABI to support flush"
	IB_UVERBS_DEVICE_FLUSH_PERSISTENT = 0x8000000000  // 1ULL << 39, same patch
	IB_UVERBS_DEVICE_ATOMIC_WRITE     = 0x10000000000 // 1ULL << 40, rdma-core d77c0504c, to kernel c2d939002934
)

// C: enum ib_uverbs_access_flags (include/uapi/rdma/ib_user_ioctl_verbs.h),
// Linux 6.2, "RDMA: Extend RDMA user ABI to support flush".
const (
	IB_UVERBS_ACCESS_FLUSH_GLOBAL     = 0x100 // 1 << 8
	IB_UVERBS_ACCESS_FLUSH_PERSISTENT = 0x200 // 1 << 9
)

// C: enum ib_placement_type (include/uapi/rdma/ib_user_verbs.h), Linux 6.2,
// "RDMA: Extend RDMA user ABI to support flush": RXESendWRWRFlush.Type.
const (
	IB_FLUSH_GLOBAL     = 1 // 1U << 0
	IB_FLUSH_PERSISTENT = 2 // 1U << 1
)

// C: enum ib_selectivity_level (include/uapi/rdma/ib_user_verbs.h), Linux
// 6.2, same patch: RXESendWRWRFlush.Level.
const (
	IB_FLUSH_RANGE = 0
	IB_FLUSH_MR    = 1
)

// RXESendWRWRFlush is the anonymous struct at struct rxe_send_wr.wr.flush
// (include/uapi/rdma/rdma_user_rxe.h, Linux 6.2, "RDMA/rxe: Extend rxe
// user ABI to support flush"): the member of the work request union an
// rxe FLUSH reads. It is the first member of the union and no larger than
// the others, so the union's size does not change.
//
// C: struct rxe_send_wr.wr.flush
type RXESendWRWRFlush struct {
	RemoteAddr uint64
	Length     uint32
	RKey       uint32
	Type       uint8 // IB_FLUSH_GLOBAL | IB_FLUSH_PERSISTENT
	Level      uint8 // IB_FLUSH_RANGE or IB_FLUSH_MR
	_          [6]byte
}

// Flush returns the member flush (Linux 6.2).
func (u *RXESendWRWR) Flush() *RXESendWRWRFlush { return (*RXESendWRWRFlush)(unsafe.Pointer(u)) }

// OffsetofRXEDMAInfoAtomicWR is the offset of the flexible array member
// __u8 atomic_wr[] of struct rxe_dma_info (include/uapi/rdma/rdma_user_rxe.h,
// Linux 6.2, kernel c2d939002934 "RDMA/rxe: Extend rxe user ABI to
// support atomic write"): the 8 bytes an rxe ATOMIC WRITE carries. It
// shares its union with inline_data and sge.
const OffsetofRXEDMAInfoAtomicWR = OffsetofRXEDMAInfoInlineData
