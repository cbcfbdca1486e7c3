/* golden prints the bytes of mlx5 work queue segments, WQEs and CQEs as
 * Debian's infiniband/mlx5dv.h lays them out, for golden_test.go: the
 * header's inline helpers where it has them (mlx5dv_set_ctrl_seg,
 * mlx5dv_set_data_seg, mlx5dv_set_dgram_seg), struct fields by name with
 * htobe* elsewhere, and the header's constants, sizes and offsets.
 * Output: one "name value" line each; bytes as lowercase hex. */
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

static void hex(const char *name, const void *p, size_t n)
{
	const uint8_t *b = p;
	printf("%s ", name);
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

#define K(x) printf("const %s %lld\n", #x, (long long)(x))
#define SZ(t) printf("sizeof %s %zu\n", #t, sizeof(struct t))
#define OFF(t, f) printf("offsetof %s.%s %zu\n", #t, #f, offsetof(struct t, f))

static const uint8_t rmac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
static const uint8_t rgid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};

int main(void)
{
	uint8_t buf[256];

	/* control segments */
	memset(buf, 0xee, sizeof buf);
	mlx5dv_set_ctrl_seg((void *)buf, 0x1234, MLX5_OPCODE_SEND, 0, 0xabcdef,
			    MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED, 3, 0, 0);
	((struct mlx5_wqe_ctrl_seg *)buf)->dci_stream_channel_id = 0;
	hex("ctrl_send", buf, 16);
	mlx5dv_set_ctrl_seg((void *)buf, 0xffff, MLX5_OPCODE_RDMA_WRITE_IMM, 0, 1,
			    MLX5_WQE_CTRL_FENCE | MLX5_WQE_CTRL_CQ_UPDATE, 5, 0, htobe32(0xdeadbeef));
	((struct mlx5_wqe_ctrl_seg *)buf)->dci_stream_channel_id = 0;
	hex("ctrl_write_imm", buf, 16);
	mlx5dv_set_ctrl_seg((void *)buf, 0, MLX5_OPCODE_ATOMIC_CS, 0, 0xffffff, 0, 4, 0, 0);
	((struct mlx5_wqe_ctrl_seg *)buf)->dci_stream_channel_id = 0;
	hex("ctrl_cas", buf, 16);

	/* remote address, atomic, data, terminator */
	memset(buf, 0, sizeof buf);
	struct mlx5_wqe_raddr_seg *r = (void *)buf;
	r->raddr = htobe64(0x0102030405060708ULL);
	r->rkey = htobe32(0x11223344);
	hex("raddr", buf, sizeof *r);
	struct mlx5_wqe_atomic_seg *a = (void *)buf;
	a->swap_add = htobe64(0xa1a2a3a4a5a6a7a8ULL);
	a->compare = htobe64(0xb1b2b3b4b5b6b7b8ULL);
	hex("atomic_cas", buf, sizeof *a);
	memset(buf, 0, sizeof buf);
	a->swap_add = htobe64(5);
	hex("atomic_faa", buf, sizeof *a);
	mlx5dv_set_data_seg((void *)buf, 0x1000, 0x55667788, 0x7f0000001000ULL);
	hex("data", buf, 16);
	mlx5dv_set_data_seg((void *)buf, 0, MLX5_INVALID_LKEY, 0);
	hex("data_end", buf, 16);

	/* inline: 13 bytes, 4-byte header, padded to 32 */
	memset(buf, 0, sizeof buf);
	struct mlx5_wqe_inl_data_seg *in = (void *)buf;
	in->byte_count = htobe32(13 | MLX5_INLINE_SEG);
	memcpy(in + 1, "hello, world!", 13);
	hex("inline13", buf, 32);

	/* SRQ next segment */
	memset(buf, 0, sizeof buf);
	((struct mlx5_wqe_srq_next_seg *)buf)->next_wqe_index = htobe16(0x0102);
	hex("srq_next", buf, sizeof(struct mlx5_wqe_srq_next_seg));

	/* datagram segments: RoCE v2 (rate 7, sl 5, tclass 0x20, hop 64,
	 * sgid 3, flow label 0x12345, sport from the flow label), IB global
	 * and IB local */
	memset(buf, 0, sizeof buf);
	uint16_t sport = ibv_flow_label_to_udp_sport(0x12345);
	printf("sport %u\n", sport);
	mlx5dv_set_dgram_seg((void *)buf, (uint64_t)0x11111111 << 32, 0x123456, 1,
			     (7 << 4) | ((5 & 7) << 1), 0, sport, (uint8_t *)rmac, 0x20, 64,
			     (3 << 20) | 0x12345, (uint8_t *)rgid);
	hex("dgram_roce", buf, sizeof(struct mlx5_wqe_datagram_seg));
	memset(buf, 0, sizeof buf);
	uint8_t zmac[6] = {0};
	mlx5dv_set_dgram_seg((void *)buf, (uint64_t)0x80010000 << 32, 0xfedcba, 1,
			     (2 << 4) | 9, 0x45, 0xbeef, zmac, 0x10, 2,
			     (1 << 30) | (1 << 20) | 0xabcde, (uint8_t *)rgid);
	hex("dgram_ib_global", buf, sizeof(struct mlx5_wqe_datagram_seg));
	memset(buf, 0, sizeof buf);
	uint8_t zgid[16] = {0};
	mlx5dv_set_dgram_seg((void *)buf, (uint64_t)0x22 << 32, 2, 1, 3, 1, 0x0007, zmac, 0, 0, 0, zgid);
	hex("dgram_ib_local", buf, sizeof(struct mlx5_wqe_datagram_seg));

	/* whole WQEs as qp.c _mlx5_post_send lays them out */
	memset(buf, 0, sizeof buf);
	mlx5dv_set_ctrl_seg((void *)buf, 7, MLX5_OPCODE_RDMA_WRITE, 0, 0x000abc, MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	((struct mlx5_wqe_ctrl_seg *)buf)->dci_stream_channel_id = 0;
	r = (void *)(buf + 16);
	r->raddr = htobe64(0x10000);
	r->rkey = htobe32(0x1234);
	mlx5dv_set_data_seg((void *)(buf + 32), 4096, 0x99, 0x20000);
	hex("wqe_rc_write", buf, 64);

	memset(buf, 0, sizeof buf);
	mlx5dv_set_ctrl_seg((void *)buf, 8, MLX5_OPCODE_ATOMIC_FA, 0, 0x000abc, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE, 4, 0, 0);
	((struct mlx5_wqe_ctrl_seg *)buf)->dci_stream_channel_id = 0;
	r = (void *)(buf + 16);
	r->raddr = htobe64(0x10008);
	r->rkey = htobe32(0x1234);
	a = (void *)(buf + 32);
	a->swap_add = htobe64(3);
	mlx5dv_set_data_seg((void *)(buf + 48), 8, 0x99, 0x20008);
	hex("wqe_rc_faa", buf, 64);

	memset(buf, 0, sizeof buf);
	mlx5dv_set_ctrl_seg((void *)buf, 9, MLX5_OPCODE_SEND_IMM, 0, 0x000abd, MLX5_WQE_CTRL_CQ_UPDATE, 5, 0, htobe32(0x01020304));
	((struct mlx5_wqe_ctrl_seg *)buf)->dci_stream_channel_id = 0;
	mlx5dv_set_dgram_seg((void *)(buf + 16), (uint64_t)0x11111111 << 32, 0x123456, 1,
			     (7 << 4) | ((5 & 7) << 1), 0, sport, (uint8_t *)rmac, 0x20, 64,
			     (3 << 20) | 0x12345, (uint8_t *)rgid);
	mlx5dv_set_data_seg((void *)(buf + 64), 256, 0x77, 0x30000);
	hex("wqe_ud_send_imm", buf, 128);

	memset(buf, 0, sizeof buf);
	mlx5dv_set_ctrl_seg((void *)buf, 10, MLX5_OPCODE_SEND, 0, 0x000abc, MLX5_WQE_CTRL_SOLICITED, 3, 0, 0);
	((struct mlx5_wqe_ctrl_seg *)buf)->dci_stream_channel_id = 0;
	in = (void *)(buf + 16);
	in->byte_count = htobe32(13 | MLX5_INLINE_SEG);
	memcpy(in + 1, "hello, world!", 13);
	hex("wqe_rc_send_inline", buf, 64);

	/* CQEs, fields by name */
	struct mlx5_cqe64 c;
	memset(&c, 0, sizeof c);
	c.sop_drop_qpn = htobe32(MLX5_OPCODE_RDMA_READ << 24 | 0x000abc);
	c.byte_cnt = htobe32(4096);
	c.wqe_counter = htobe16(0x1234);
	c.timestamp = htobe64(0x0102030405060708ULL);
	c.op_own = MLX5_CQE_REQ << 4 | 1;
	hex("cqe_req_read", &c, sizeof c);
	memset(&c, 0, sizeof c);
	c.sop_drop_qpn = htobe32(MLX5_OPCODE_ATOMIC_CS << 24 | 0x000abc);
	c.wqe_counter = htobe16(0xffff);
	c.op_own = MLX5_CQE_REQ << 4;
	hex("cqe_req_cas", &c, sizeof c);
	memset(&c, 0, sizeof c);
	c.srqn_uidx = htobe32(0x77);
	c.imm_inval_pkey = htobe32(0xcafebabe);
	c.byte_cnt = htobe32(100);
	c.flags_rqpn = htobe32(2u << 28 | 5u << 24 | 0x0a0b0c);
	c.slid = htobe16(0x4321);
	c.ml_path = 0x85;
	c.sop_drop_qpn = htobe32(0x00abcdef);
	c.wqe_counter = htobe16(7);
	c.op_own = MLX5_CQE_RESP_SEND_IMM << 4 | 2;
	hex("cqe_resp_send_imm", &c, sizeof c);
	memset(&c, 0, sizeof c);
	c.imm_inval_pkey = htobe32(0x00000102);
	c.byte_cnt = htobe32(1 << 20);
	c.sop_drop_qpn = htobe32(0x000001);
	c.wqe_counter = htobe16(0x8000);
	c.op_own = MLX5_CQE_RESP_WR_IMM << 4 | 1;
	hex("cqe_resp_write_imm", &c, sizeof c);
	memset(&c, 0, sizeof c);
	c.imm_inval_pkey = htobe32(0x5566);
	c.sop_drop_qpn = htobe32(0x000002);
	c.op_own = MLX5_CQE_RESP_SEND_INV << 4;
	hex("cqe_resp_send_inv", &c, sizeof c);
	struct mlx5_err_cqe e;
	memset(&e, 0, sizeof e);
	e.syndrome = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
	e.vendor_err_synd = 0x88;
	e.s_wqe_opcode_qpn = htobe32(MLX5_OPCODE_ATOMIC_CS << 24 | 0x000123);
	e.wqe_counter = htobe16(9);
	e.op_own = MLX5_CQE_REQ_ERR << 4 | 1;
	hex("cqe_req_err", &e, sizeof e);
	memset(&e, 0, sizeof e);
	e.syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
	e.srqn = htobe32(5);
	e.s_wqe_opcode_qpn = htobe32(0x000124);
	e.wqe_counter = htobe16(10);
	e.op_own = MLX5_CQE_RESP_ERR << 4;
	hex("cqe_resp_err", &e, sizeof e);

	/* constants, sizes, offsets */
	K(MLX5_OPCODE_NOP); K(MLX5_OPCODE_SEND_INVAL); K(MLX5_OPCODE_RDMA_WRITE);
	K(MLX5_OPCODE_RDMA_WRITE_IMM); K(MLX5_OPCODE_SEND); K(MLX5_OPCODE_SEND_IMM);
	K(MLX5_OPCODE_RDMA_READ); K(MLX5_OPCODE_ATOMIC_CS); K(MLX5_OPCODE_ATOMIC_FA);
	K(MLX5_WQE_CTRL_CQ_UPDATE); K(MLX5_WQE_CTRL_SOLICITED); K(MLX5_WQE_CTRL_FENCE);
	K(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
	K(MLX5_SEND_WQE_BB); K(MLX5_INVALID_LKEY); K(MLX5_EXTENDED_UD_AV); K(MLX5_INLINE_SEG);
	K(MLX5_RCV_DBR); K(MLX5_SND_DBR); K(MLX5_CQ_DOORBELL);
	K(MLX5_CQ_DB_REQ_NOT_SOL); K(MLX5_CQ_DB_REQ_NOT);
	K(MLX5_INLINE_SCATTER_32); K(MLX5_INLINE_SCATTER_64);
	K(MLX5_CQE_REQ); K(MLX5_CQE_RESP_WR_IMM); K(MLX5_CQE_RESP_SEND); K(MLX5_CQE_RESP_SEND_IMM);
	K(MLX5_CQE_RESP_SEND_INV); K(MLX5_CQE_RESIZE_CQ); K(MLX5_CQE_NO_PACKET); K(MLX5_CQE_SIG_ERR);
	K(MLX5_CQE_REQ_ERR); K(MLX5_CQE_RESP_ERR); K(MLX5_CQE_INVALID);
	K(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR); K(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
	K(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR); K(MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
	K(MLX5_CQE_SYNDROME_MW_BIND_ERR); K(MLX5_CQE_SYNDROME_BAD_RESP_ERR);
	K(MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR); K(MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
	K(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR); K(MLX5_CQE_SYNDROME_REMOTE_OP_ERR);
	K(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR); K(MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
	K(MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
	K(IBV_WC_SUCCESS); K(IBV_WC_LOC_LEN_ERR); K(IBV_WC_LOC_QP_OP_ERR); K(IBV_WC_LOC_EEC_OP_ERR);
	K(IBV_WC_LOC_PROT_ERR); K(IBV_WC_WR_FLUSH_ERR); K(IBV_WC_MW_BIND_ERR); K(IBV_WC_BAD_RESP_ERR);
	K(IBV_WC_LOC_ACCESS_ERR); K(IBV_WC_REM_INV_REQ_ERR); K(IBV_WC_REM_ACCESS_ERR);
	K(IBV_WC_REM_OP_ERR); K(IBV_WC_RETRY_EXC_ERR); K(IBV_WC_RNR_RETRY_EXC_ERR);
	K(IBV_WC_REM_ABORT_ERR); K(IBV_WC_GENERAL_ERR);
	K(IBV_WC_SEND); K(IBV_WC_RDMA_WRITE); K(IBV_WC_RDMA_READ); K(IBV_WC_COMP_SWAP);
	K(IBV_WC_FETCH_ADD); K(IBV_WC_RECV); K(IBV_WC_RECV_RDMA_WITH_IMM);
	K(IBV_WC_GRH); K(IBV_WC_WITH_IMM); K(IBV_WC_WITH_INV);
	K(IBV_QPT_RC); K(IBV_QPT_UC); K(IBV_QPT_UD);
	SZ(mlx5_wqe_ctrl_seg); SZ(mlx5_wqe_raddr_seg); SZ(mlx5_wqe_atomic_seg);
	SZ(mlx5_wqe_data_seg); SZ(mlx5_wqe_datagram_seg); SZ(mlx5_wqe_srq_next_seg);
	SZ(mlx5_cqe64); SZ(mlx5_err_cqe);
	OFF(mlx5_wqe_ctrl_seg, fm_ce_se); OFF(mlx5_wqe_ctrl_seg, imm);
	OFF(mlx5_wqe_srq_next_seg, next_wqe_index);
	OFF(mlx5_cqe64, wqe_counter); OFF(mlx5_cqe64, op_own); OFF(mlx5_cqe64, byte_cnt);
	OFF(mlx5_cqe64, imm_inval_pkey); OFF(mlx5_cqe64, srqn_uidx); OFF(mlx5_cqe64, sop_drop_qpn);
	OFF(mlx5_cqe64, flags_rqpn); OFF(mlx5_cqe64, slid); OFF(mlx5_cqe64, ml_path);
	OFF(mlx5_cqe64, timestamp);
	OFF(mlx5_err_cqe, syndrome); OFF(mlx5_err_cqe, vendor_err_synd); OFF(mlx5_err_cqe, s_wqe_opcode_qpn);
	return 0;
}
