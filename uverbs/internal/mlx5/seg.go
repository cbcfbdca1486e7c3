package mlx5

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// The segment encoders write one segment at the start of b, in the
// device's big-endian layout (mlx5dv.h struct mlx5_wqe_*_seg). b must hold
// the segment; they are the single place each layout is spelled out, and
// the golden-bytes test compares them with the C header's.

var be = binary.BigEndian

// putBE64 is be.PutUint64 written so that the compiler makes it one
// 8-byte store: given a value some of whose bytes it knows are zero (a
// ctrl segment's opmod, signature, reserved bytes), be.PutUint64 is
// compiled into byte, word and long stores of the parts. The bytes are
// the same on any host: v byte-reversed, stored little-endian.
func putBE64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, bits.ReverseBytes64(v)) }

// PutCtrl writes a control segment (struct mlx5_wqe_ctrl_seg, 16 bytes) as
// mlx5dv_set_ctrl_seg does: idx is the WQE's position counter (sq.cur_post,
// 16 bits), ds the WQE size in 16-byte units, fmCeSe the Ctrl* bits. imm
// is in host order and written big-endian: the immediate data of the
// *_IMM opcodes (libmlx5 copies ibv_send_wr.imm_data, which the
// application already holds in network order) or the rkey to invalidate
// of SEND_INVAL (htobe32(invalidate_rkey)). The signature byte and the DCI
// stream channel are written as zero.
func PutCtrl(b []byte, opcode, opmod uint8, idx uint16, qpn uint32, ds uint8, fmCeSe uint8, imm uint32) {
	_ = b[15]
	putBE64(b[0:], uint64(uint32(opmod)<<24|uint32(idx)<<8|uint32(opcode))<<32|uint64(qpn<<8|uint32(ds)))
	putBE64(b[8:], uint64(fmCeSe)<<32|uint64(imm))
}

// PutRAddr writes a remote address segment (struct mlx5_wqe_raddr_seg).
func PutRAddr(b []byte, raddr uint64, rkey uint32) {
	_ = b[15]
	putBE64(b[0:], raddr)
	putBE64(b[8:], uint64(rkey)<<32) // rkey, then 4 reserved bytes

}

// PutAtomic writes an atomic segment (struct mlx5_wqe_atomic_seg):
// swap_add is the swap value of a compare-and-swap or the addend of a
// fetch-and-add; compare is compare-and-swap's compare value (libmlx5's
// set_atomic_seg leaves it unwritten for fetch-and-add; PutAtomic writes
// the value given, zero for fetch-and-add).
func PutAtomic(b []byte, swapAdd, compare uint64) {
	_ = b[15]
	putBE64(b[0:], swapAdd)
	putBE64(b[8:], compare)
}

// PutData writes a data (scatter/gather) segment (struct
// mlx5_wqe_data_seg) as mlx5dv_set_data_seg does.
func PutData(b []byte, length, lkey uint32, addr uint64) {
	_ = b[15]
	putBE64(b[0:], uint64(length)<<32|uint64(lkey))
	putBE64(b[8:], addr)
}

// PutDataEnd writes the terminator of a receive scatter list: byte count
// 0, MLX5_INVALID_LKEY, address 0 (qp.c set_data_ptr_seg_end).
func PutDataEnd(b []byte) { PutData(b, 0, InvalidLKey, 0) }

// PutInlineHeader writes the 4-byte header of an inline data segment
// (struct mlx5_wqe_inl_data_seg): the total inline length with
// MLX5_INLINE_SEG set. The data follows it; the segment occupies
// InlineDS(n) 16-byte units.
func PutInlineHeader(b []byte, n uint32) { be.PutUint32(b[0:], n|InlineSeg) }

// InlineDS is the size in 16-byte units of an inline segment of n data
// bytes: align(4+n, 16)/16 (qp.c set_data_inl_seg); 0 when n is 0, where
// libmlx5 writes no segment.
func InlineDS(n int) int {
	if n == 0 {
		return 0
	}
	return (4 + n + 15) / 16
}

// AV is an address vector: the 48-byte datagram segment of a UD send
// (struct mlx5_wqe_av), built once per address handle (verbs.c
// mlx5_create_ah) and copied into each WQE with the remote QPN and Q_Key.
type AV [AVSize]byte

// RoCEAV builds the AV of a RoCE address handle as mlx5_create_ah does for
// an Ethernet port: stat_rate_sl = rate<<4 | (sl&7)<<1, no GRH bit (RoCE
// always carries a GRH), the destination MAC, traffic class, hop limit,
// source GID index and flow label, and the destination GID. udpSport is
// the RoCE v2 UDP source port written in the rlid field (RoCEUDPSport
// gives libmlx5's choice; libmlx5 leaves 0 for a RoCE v1 GID, which has
// no UDP header). rate is the mlx5 rate code (0: the port's rate).
func RoCEAV(rate, sl uint8, dmac [6]byte, tclass, hopLimit, sgidIndex uint8, flowLabel uint32, dgid [16]byte, udpSport uint16) AV {
	var av AV
	av[12] = rate<<4 | (sl&7)<<1
	be.PutUint16(av[14:], udpSport)
	copy(av[20:26], dmac[:])
	av[26] = tclass
	av[27] = hopLimit
	be.PutUint32(av[28:], uint32(sgidIndex)<<20|flowLabel&0xfffff)
	copy(av[32:48], dgid[:])
	return av
}

// IBAV builds the AV of an InfiniBand address handle as mlx5_create_ah
// does: stat_rate_sl = rate<<4 | sl&0xf, fl_mlid = source path bits,
// rlid = the destination LID, and with global set the GRH fields with the
// GRH bit (1<<30 of grh_gid_fl).
func IBAV(rate, sl, srcPathBits uint8, dlid uint16, global bool, tclass, hopLimit, sgidIndex uint8, flowLabel uint32, dgid [16]byte) AV {
	var av AV
	av[12] = rate<<4 | sl&0xf
	av[13] = srcPathBits & 0x7f
	be.PutUint16(av[14:], dlid)
	if global {
		av[26] = tclass
		av[27] = hopLimit
		be.PutUint32(av[28:], 1<<30|uint32(sgidIndex)<<20|flowLabel&0xfffff)
		copy(av[32:48], dgid[:])
	}
	return av
}

// RoCEUDPSport is the RoCE v2 UDP source port of an address, as
// libmlx5's mlx5_ah_set_udp_sport picks it: derived from a nonzero flow
// label, else random in the range RoCE v2 allows (0xC000 to 0xFFFF, IB
// Annex A17), which spreads AHs over ECMP paths.
func RoCEUDPSport(fl uint32) uint16 {
	if fl&0xfffff != 0 {
		return FlowLabelToUDPSport(fl)
	}
	return uint16(0xc000 + rand.IntN(0x4000))
}

// FlowLabelToUDPSport is libibverbs' ibv_flow_label_to_udp_sport: the
// RoCE v2 UDP source port derived from a nonzero flow label.
func FlowLabelToUDPSport(fl uint32) uint16 {
	low := fl & 0x03fff
	high := fl & 0xfc000
	low ^= high >> 14
	return uint16(low | 0xc000)
}

// PutDatagram writes a UD datagram segment: the AV with the remote QPN
// (and MLX5_EXTENDED_UD_AV) and the Q_Key, as qp.c _set_datagram_seg.
func PutDatagram(b []byte, av *AV, remoteQPN, qkey uint32) {
	_ = b[AVSize-1]
	copy(b[:AVSize], av[:])
	be.PutUint32(b[0:], qkey)
	be.PutUint32(b[4:], 0)
	be.PutUint32(b[8:], remoteQPN&0xffffff|ExtendedUDAV)
}
