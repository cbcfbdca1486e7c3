package mlx5

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/purerdma/rdma/internal/testutils"
)

// golden compiles and runs testdata/golden.c, which prints segments, WQEs
// and CQEs laid out by Debian's infiniband/mlx5dv.h, and returns its lines
// by name. Without cc or the header it skips, or fails when
// PURERDMA_TEST_ABI=1 (make unit) or PURERDMA_REQUIRE_DEVICE=1.
func golden(t *testing.T) map[string]string {
	t.Helper()
	testutils.HostOnly(t)
	need := func(err error) {
		t.Helper()
		if os.Getenv("PURERDMA_REQUIRE_DEVICE") == "1" {
			t.Fatalf("PURERDMA_REQUIRE_DEVICE=1 but: %v", err)
		}
		testutils.NeedTool(t, "PURERDMA_TEST_ABI", err)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		need(errors.New("no C compiler (cc) for the mlx5dv.h golden bytes"))
	}
	if _, err := os.Stat("/usr/include/infiniband/mlx5dv.h"); err != nil {
		need(errors.New("no /usr/include/infiniband/mlx5dv.h (rdma-core's libibverbs-dev)"))
	}
	bin := filepath.Join(t.TempDir(), "golden")
	if out, err := exec.Command(cc, "-O0", "-Wall", "-Werror", "-o", bin, "testdata/golden.c").CombinedOutput(); err != nil {
		t.Fatalf("cc testdata/golden.c: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("golden: %v", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch len(f) {
		case 2:
			m[f[0]] = f[1]
		case 3:
			m[f[0]+" "+f[1]] = f[2]
		default:
			t.Fatalf("golden: bad line %q", sc.Text())
		}
	}
	return m
}

// plainWriter performs the stores on ordinary memory, in order, nothing
// more.
type plainWriter struct{}

func (plainWriter) StoreUint32BE(b []byte, off int, v uint32) { be.PutUint32(b[off:], v) }
func (plainWriter) WriteBarrier()                             {}
func (plainWriter) StoreUint64BE(b []byte, off int, v uint64) { be.PutUint64(b[off:], v) }
func (plainWriter) Copy64(dst []byte, src *[64]byte) bool     { copy(dst[:64], src[:]); return true }

var (
	rmac = [6]byte{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}
	rgid = [16]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55}
)

// newSQAt returns an SQ whose next work request has index counter.
func newSQAt(t *testing.T, typ QPType, qpn uint32, counter int) *SQ {
	t.Helper()
	sz, err := SQSize(typ, false, 64, 4, 64, lim)
	if err != nil {
		t.Fatal(err)
	}
	bf, err := NewBlueFlame(make([]byte, 512), true, plainWriter{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewSQ(SQConfig{Buf: make([]byte, sz.Bytes), Sizing: sz, QPN: qpn, Type: typ, DBRec: make([]byte, 8), BlueFlame: bf, Writer: plainWriter{}})
	if err != nil {
		t.Fatal(err)
	}
	for range counter {
		if err := q.Begin(OpNOP, 0, 0); err != nil {
			t.Fatal(err)
		}
		if typ == UD {
			av := AV{}
			if err := q.Datagram(&av, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Finish(0); err != nil {
			t.Fatal(err)
		}
		q.Complete(uint16(q.curPost - 1))
	}
	// Start the golden WQE at a known offset with clean memory.
	q.curPost = uint32(counter)
	clear(q.buf)
	return q
}

func TestGoldenSegments(t *testing.T) {
	g := golden(t)
	seg := func(f func(b []byte)) []byte {
		b := make([]byte, 16)
		for i := range b {
			b[i] = 0xee
		}
		f(b)
		return b
	}
	sport := FlowLabelToUDPSport(0x12345)
	if got := strconv.Itoa(int(sport)); got != g["sport"] {
		t.Errorf("FlowLabelToUDPSport(0x12345) = %s, ibv_flow_label_to_udp_sport %s", got, g["sport"])
	}
	inl := make([]byte, 32)
	PutInlineHeader(inl, 13)
	copy(inl[4:], "hello, world!")
	next := make([]byte, 16)
	be.PutUint16(next[2:], 0x0102)
	dg := func(av AV, qpn, qkey uint32) []byte {
		b := make([]byte, AVSize)
		PutDatagram(b, &av, qpn, qkey)
		return b
	}
	cases := map[string][]byte{
		"ctrl_send": seg(func(b []byte) {
			PutCtrl(b, OpSend, 0, 0x1234, 0xabcdef, 3, CtrlCQUpdate|CtrlSolicited, 0)
		}),
		"ctrl_write_imm":  seg(func(b []byte) { PutCtrl(b, OpRDMAWriteImm, 0, 0xffff, 1, 5, CtrlFence|CtrlCQUpdate, 0xdeadbeef) }),
		"ctrl_cas":        seg(func(b []byte) { PutCtrl(b, OpAtomicCS, 0, 0, 0xffffff, 4, 0, 0) }),
		"raddr":           seg(func(b []byte) { PutRAddr(b, 0x0102030405060708, 0x11223344) }),
		"atomic_cas":      seg(func(b []byte) { PutAtomic(b, 0xa1a2a3a4a5a6a7a8, 0xb1b2b3b4b5b6b7b8) }),
		"atomic_faa":      seg(func(b []byte) { PutAtomic(b, 5, 0) }),
		"data":            seg(func(b []byte) { PutData(b, 0x1000, 0x55667788, 0x7f0000001000) }),
		"data_end":        seg(PutDataEnd),
		"inline13":        inl,
		"srq_next":        next,
		"dgram_roce":      dg(RoCEAV(7, 5, rmac, 0x20, 64, 3, 0x12345, rgid, sport), 0x123456, 0x11111111),
		"dgram_ib_global": dg(IBAV(2, 9, 0x45, 0xbeef, true, 0x10, 2, 1, 0xabcde, rgid), 0xfedcba, 0x80010000),
		"dgram_ib_local":  dg(IBAV(0, 3, 1, 7, false, 0, 0, 0, 0, [16]byte{}), 2, 0x22),
	}
	for name, got := range cases {
		want, ok := g[name]
		if !ok {
			t.Errorf("%s: not printed by golden.c", name)
			continue
		}
		if h := hex.EncodeToString(got); h != want {
			t.Errorf("%s:\n got %s\nwant %s", name, h, want)
		}
	}
}

// TestGoldenWQEs builds whole work requests with the SQ builder and
// compares them with the same WQEs assembled in C.
func TestGoldenWQEs(t *testing.T) {
	g := golden(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	wqe := func(q *SQ, n int) string {
		return hex.EncodeToString(q.buf[q.lastStart : q.lastStart+n])
	}
	q := newSQAt(t, RC, 0xabc, 7)
	must(q.Begin(OpRDMAWrite, CtrlCQUpdate, 0))
	must(q.RemoteAddr(0x10000, 0x1234))
	must(q.Data(0x20000, 4096, 0x99))
	must(q.Finish(1))
	if got := wqe(q, 64); got != g["wqe_rc_write"] {
		t.Errorf("RC write:\n got %s\nwant %s", got, g["wqe_rc_write"])
	}
	q = newSQAt(t, RC, 0xabc, 8)
	must(q.Begin(OpAtomicFA, CtrlCQUpdate|CtrlFence, 0))
	must(q.RemoteAddr(0x10008, 0x1234))
	must(q.Atomic(3, 99))
	must(q.Data(0x20008, 8, 0x99))
	must(q.Finish(1))
	if got := wqe(q, 64); got != g["wqe_rc_faa"] {
		t.Errorf("RC fetch-and-add:\n got %s\nwant %s", got, g["wqe_rc_faa"])
	}
	q = newSQAt(t, UD, 0xabd, 9)
	av := RoCEAV(7, 5, rmac, 0x20, 64, 3, 0x12345, rgid, FlowLabelToUDPSport(0x12345))
	must(q.Begin(OpSendImm, CtrlCQUpdate, 0x01020304))
	must(q.Datagram(&av, 0x123456, 0x11111111))
	must(q.Data(0x30000, 256, 0x77))
	must(q.Finish(1))
	if got := wqe(q, 128); got != g["wqe_ud_send_imm"] {
		t.Errorf("UD send with immediate:\n got %s\nwant %s", got, g["wqe_ud_send_imm"])
	}
	q = newSQAt(t, RC, 0xabc, 10)
	must(q.Begin(OpSend, CtrlSolicited, 0))
	must(q.Inline([]byte("hello, ")))
	must(q.Inline([]byte("world!")))
	must(q.Finish(1))
	if got := wqe(q, 64); got != g["wqe_rc_send_inline"] {
		t.Errorf("RC inline send:\n got %s\nwant %s", got, g["wqe_rc_send_inline"])
	}
}

// TestGoldenCQEs decodes CQEs whose fields golden.c set by name.
func TestGoldenCQEs(t *testing.T) {
	g := golden(t)
	tests := []struct {
		name string
		want CQE
	}{
		{"cqe_req_read", CQE{Opcode: CQEReq, WCOpcode: WCOpRDMARead, SQOpcode: OpRDMARead, QPN: 0xabc, WQECounter: 0x1234, ByteLen: 4096, Timestamp: 0x0102030405060708}},
		{"cqe_req_cas", CQE{Opcode: CQEReq, WCOpcode: WCOpCompSwap, SQOpcode: OpAtomicCS, QPN: 0xabc, WQECounter: 0xffff, ByteLen: 8}},
		{"cqe_resp_send_imm", CQE{Opcode: CQERespSendImm, WCOpcode: WCOpRecv, WCFlags: WCFlagWithImm | WCFlagGRH, SE: true,
			QPN: 0xabcdef, SRQNUIdx: 0x77, WQECounter: 7, ByteLen: 100, Imm: 0xcafebabe, SrcQP: 0x0a0b0c, SL: 5, SLID: 0x4321, PathBits: 5, PKeyIndex: 0xbabe}},
		{"cqe_resp_write_imm", CQE{Opcode: CQERespWRImm, WCOpcode: WCOpRecvRDMAWImm, WCFlags: WCFlagWithImm, QPN: 1, WQECounter: 0x8000, ByteLen: 1 << 20, Imm: 0x102, PKeyIndex: 0x102}},
		{"cqe_resp_send_inv", CQE{Opcode: CQERespSendInv, WCOpcode: WCOpRecv, WCFlags: WCFlagWithInv, QPN: 2, Imm: 0x5566, PKeyIndex: 0x5566}},
		{"cqe_req_err", CQE{Opcode: CQEReqErr, Status: WCRemAccessErr, WCOpcode: wcOpUnknown, Syndrome: SyndRemoteAccess, VendorErr: 0x88, SQOpcode: OpAtomicCS, QPN: 0x123, WQECounter: 9}},
		{"cqe_resp_err", CQE{Opcode: CQERespErr, Status: WCWRFlushErr, WCOpcode: wcOpUnknown, Syndrome: SyndWRFlush, QPN: 0x124, SRQNUIdx: 5, WQECounter: 10}},
	}
	for _, tt := range tests {
		b, err := hex.DecodeString(g[tt.name])
		if err != nil || len(b) != CQESize {
			t.Fatalf("%s: golden bytes %q: %v", tt.name, g[tt.name], err)
		}
		var c CQE
		if !DecodeCQE(b, &c) {
			t.Errorf("%s: not decoded", tt.name)
		}
		if diff := cmp.Diff(tt.want, c); diff != "" {
			t.Errorf("%s (-want +got)\n%s", tt.name, diff)
		}
	}
}

// TestGoldenConstants compares every constant, size and offset the Go code
// relies on with the C headers'.
func TestGoldenConstants(t *testing.T) {
	g := golden(t)
	want := map[string]int{
		"const MLX5_OPCODE_NOP": OpNOP, "const MLX5_OPCODE_SEND_INVAL": OpSendInval, "const MLX5_OPCODE_RDMA_WRITE": OpRDMAWrite,
		"const MLX5_OPCODE_RDMA_WRITE_IMM": OpRDMAWriteImm, "const MLX5_OPCODE_SEND": OpSend, "const MLX5_OPCODE_SEND_IMM": OpSendImm,
		"const MLX5_OPCODE_RDMA_READ": OpRDMARead, "const MLX5_OPCODE_ATOMIC_CS": OpAtomicCS, "const MLX5_OPCODE_ATOMIC_FA": OpAtomicFA,
		"const MLX5_WQE_CTRL_CQ_UPDATE": CtrlCQUpdate, "const MLX5_WQE_CTRL_SOLICITED": CtrlSolicited, "const MLX5_WQE_CTRL_FENCE": CtrlFence,
		"const MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE": CtrlSmallFence,
		"const MLX5_SEND_WQE_BB":                    SendWQEBB, "const MLX5_INVALID_LKEY": InvalidLKey, "const MLX5_EXTENDED_UD_AV": ExtendedUDAV,
		"const MLX5_INLINE_SEG": InlineSeg, "const MLX5_RCV_DBR": RcvDBR / 4, "const MLX5_SND_DBR": SndDBR / 4,
		"const MLX5_CQ_DOORBELL": CQDoorbell, "const MLX5_CQ_DB_REQ_NOT_SOL": armSolicited, "const MLX5_CQ_DB_REQ_NOT": armNext,
		"const MLX5_INLINE_SCATTER_32": inlineScatter32, "const MLX5_INLINE_SCATTER_64": inlineScatter64,
		"const MLX5_CQE_REQ": CQEReq, "const MLX5_CQE_RESP_WR_IMM": CQERespWRImm, "const MLX5_CQE_RESP_SEND": CQERespSend,
		"const MLX5_CQE_RESP_SEND_IMM": CQERespSendImm, "const MLX5_CQE_RESP_SEND_INV": CQERespSendInv, "const MLX5_CQE_RESIZE_CQ": CQEResizeCQ,
		"const MLX5_CQE_NO_PACKET": CQENoPacket, "const MLX5_CQE_SIG_ERR": CQESigErr, "const MLX5_CQE_REQ_ERR": CQEReqErr,
		"const MLX5_CQE_RESP_ERR": CQERespErr, "const MLX5_CQE_INVALID": CQEInvalid,
		"const MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR": SyndLocalLength, "const MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR": SyndLocalQPOp,
		"const MLX5_CQE_SYNDROME_LOCAL_PROT_ERR": SyndLocalProt, "const MLX5_CQE_SYNDROME_WR_FLUSH_ERR": SyndWRFlush,
		"const MLX5_CQE_SYNDROME_MW_BIND_ERR": SyndMWBind, "const MLX5_CQE_SYNDROME_BAD_RESP_ERR": SyndBadResp,
		"const MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR": SyndLocalAccess, "const MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR": SyndRemoteInvalReq,
		"const MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR": SyndRemoteAccess, "const MLX5_CQE_SYNDROME_REMOTE_OP_ERR": SyndRemoteOp,
		"const MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR": SyndTransportRetry, "const MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR": SyndRNRRetry,
		"const MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR": SyndRemoteAborted,
		"const IBV_WC_SUCCESS":                       WCSuccess, "const IBV_WC_LOC_LEN_ERR": WCLocLenErr, "const IBV_WC_LOC_QP_OP_ERR": WCLocQPOpErr,
		"const IBV_WC_LOC_EEC_OP_ERR": WCLocEECOpErr, "const IBV_WC_LOC_PROT_ERR": WCLocProtErr, "const IBV_WC_WR_FLUSH_ERR": WCWRFlushErr,
		"const IBV_WC_MW_BIND_ERR": WCMWBindErr, "const IBV_WC_BAD_RESP_ERR": WCBadRespErr, "const IBV_WC_LOC_ACCESS_ERR": WCLocAccessErr,
		"const IBV_WC_REM_INV_REQ_ERR": WCRemInvReqErr, "const IBV_WC_REM_ACCESS_ERR": WCRemAccessErr, "const IBV_WC_REM_OP_ERR": WCRemOpErr,
		"const IBV_WC_RETRY_EXC_ERR": WCRetryExcErr, "const IBV_WC_RNR_RETRY_EXC_ERR": WCRNRRetryExcErr,
		"const IBV_WC_REM_ABORT_ERR": WCRemAbortErr, "const IBV_WC_GENERAL_ERR": WCGeneralErr,
		"const IBV_WC_SEND": WCOpSend, "const IBV_WC_RDMA_WRITE": WCOpRDMAWrite, "const IBV_WC_RDMA_READ": WCOpRDMARead,
		"const IBV_WC_COMP_SWAP": WCOpCompSwap, "const IBV_WC_FETCH_ADD": WCOpFetchAdd, "const IBV_WC_RECV": WCOpRecv,
		"const IBV_WC_RECV_RDMA_WITH_IMM": WCOpRecvRDMAWImm,
		"const IBV_WC_GRH":                WCFlagGRH, "const IBV_WC_WITH_IMM": WCFlagWithImm, "const IBV_WC_WITH_INV": WCFlagWithInv,
		"const IBV_QPT_RC": int(RC), "const IBV_QPT_UC": int(UC), "const IBV_QPT_UD": int(UD),
		"sizeof mlx5_wqe_ctrl_seg": SegSize, "sizeof mlx5_wqe_raddr_seg": SegSize, "sizeof mlx5_wqe_atomic_seg": SegSize,
		"sizeof mlx5_wqe_data_seg": SegSize, "sizeof mlx5_wqe_datagram_seg": AVSize, "sizeof mlx5_wqe_srq_next_seg": srqNextSegLen,
		"sizeof mlx5_cqe64": CQESize, "sizeof mlx5_err_cqe": CQESize,
		"offsetof mlx5_wqe_ctrl_seg.fm_ce_se": 11, "offsetof mlx5_wqe_ctrl_seg.imm": 12,
		"offsetof mlx5_wqe_srq_next_seg.next_wqe_index": 2,
		"offsetof mlx5_cqe64.wqe_counter":               60, "offsetof mlx5_cqe64.op_own": 63, "offsetof mlx5_cqe64.byte_cnt": 44,
		"offsetof mlx5_cqe64.imm_inval_pkey": 36, "offsetof mlx5_cqe64.srqn_uidx": 32, "offsetof mlx5_cqe64.sop_drop_qpn": 56,
		"offsetof mlx5_cqe64.flags_rqpn": 24, "offsetof mlx5_cqe64.slid": 22, "offsetof mlx5_cqe64.ml_path": 17,
		"offsetof mlx5_cqe64.timestamp":  48,
		"offsetof mlx5_err_cqe.syndrome": 55, "offsetof mlx5_err_cqe.vendor_err_synd": 54, "offsetof mlx5_err_cqe.s_wqe_opcode_qpn": 56,
	}
	for name, v := range want {
		s, ok := g[name]
		if !ok {
			t.Errorf("%s: not printed by golden.c", name)
			continue
		}
		if c, err := strconv.ParseInt(s, 10, 64); err != nil || c != int64(v) {
			t.Errorf("%s = %d in Go, %s in C", name, v, s)
		}
	}
}
