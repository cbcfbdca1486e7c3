package mlx5

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lim is a ConnectX-like set of limits; the expected values below are
// worked out by hand from the libmlx5 functions each test names.
var lim = Limits{MaxSQDescSz: 512, MaxRQDescSz: 512, MaxSendWQEBB: 1 << 15, MaxRecvWR: 1 << 15, MaxSRQRecvWR: 1 << 15}

// TestSQSize follows verbs.c _sq_overhead, mlx5_calc_send_wqe and
// mlx5_calc_sq_size.
func TestSQSize(t *testing.T) {
	tests := []struct {
		name         string
		t            QPType
		mw           bool
		wr, sge, inl int
		want         SQSizing
		err          bool
	}{
		// overhead 192 (UMR); 192+16 = 208 -> 256; 16*256 = 4096 -> 64 blocks; inline 256-192-4.
		{"RC default 16x1", RC, true, 16, 1, 0, SQSizing{256, 64, 16, 1, 60, 4096}, false},
		// overhead 48; inline 48+align(68,16)=128 > 48+32; 100*128 -> 16384; max_post 16384/128.
		{"RC no MW 100x2 inline 64", RC, false, 100, 2, 64, SQSizing{128, 256, 128, 2, 76, 16384}, false},
		// overhead 16+48; 64+16 = 80 -> 128; 64*128 = 8192.
		{"UD 64x1", UD, false, 64, 1, 0, SQSizing{128, 128, 64, 1, 60, 8192}, false},
		// 192+align(204,16)=400 -> 448; roundup(448) = 512 -> 8 blocks, 1 post.
		{"UC inline 200", UC, true, 1, 0, 200, SQSizing{448, 8, 1, 0, 252, 512}, false},
		// UC has no RDMA read or atomics: overhead ctrl+raddr 32, as
		// libmlx5 computes it for UC's send, send-imm, write and
		// write-imm (the mlx5 oracle's scenario "qp caps");
		// 32+16 = 48 -> 64; inline 64-32-4.
		{"UC no MW 16x1", UC, false, 16, 1, 0, SQSizing{64, 16, 16, 1, 28, 1024}, false},
		// 32+align(36,16)=80 -> 128; 16*128 -> 32 blocks; inline 128-32-4.
		{"UC no MW inline 32", UC, false, 16, 1, 32, SQSizing{128, 32, 16, 1, 92, 2048}, false},
		// (512-192)/16 = 20 gather entries fit exactly; 3*512 -> 2048.
		{"RC 20 SGEs", RC, true, 3, 20, 0, SQSizing{512, 32, 4, 20, 316, 2048}, false},
		{"RC 21 SGEs", RC, true, 3, 21, 0, SQSizing{}, true},
		// 192+416 = 608 > 512.
		{"RC inline 400", RC, true, 1, 0, 400, SQSizing{}, true},
		{"no send queue", RC, true, 0, 1, 0, SQSizing{}, false},
		// 65536*256 = 2^24 bytes = 2^18 blocks > 2^15.
		{"too many blocks", RC, true, 1 << 16, 1, 0, SQSizing{}, true},
		{"bad type", QPType(9), true, 1, 1, 0, SQSizing{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SQSize(tt.t, tt.mw, tt.wr, tt.sge, tt.inl, lim)
			if (err != nil) != tt.err || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if err != nil || tt.wr == 0 {
				return
			}
			// NewSQ takes every sizing SQSize makes.
			bf, _ := NewBlueFlame(make([]byte, 512), true, plainWriter{})
			if _, err := NewSQ(SQConfig{Buf: make([]byte, got.Bytes), Sizing: got, Type: tt.t, DBRec: make([]byte, 8), BlueFlame: bf, Writer: plainWriter{}}); err != nil {
				t.Errorf("NewSQ: %v", err)
			}
		})
	}
}

// TestRQSize follows verbs.c mlx5_calc_rcv_wqe and mlx5_calc_rq_size.
func TestRQSize(t *testing.T) {
	tests := []struct {
		name    string
		wr, sge int
		srq     bool
		want    RQSizing
		err     bool
	}{
		{"16x1", 16, 1, false, RQSizing{16, 4, 16, 16, 1, 256}, false},
		// 1*16 bytes is below the 64-byte minimum: 4 WQEs, max_post 1<<ilog32(3) = 4.
		{"1x1 minimum ring", 1, 1, false, RQSizing{16, 4, 4, 4, 1, 64}, false},
		{"0 SGEs takes one", 8, 0, false, RQSizing{16, 4, 8, 8, 1, 128}, false},
		// 48 -> 64-byte WQEs holding 4 segments; 128 of them.
		{"100x3", 100, 3, false, RQSizing{64, 6, 128, 128, 4, 8192}, false},
		{"too many WRs", 1<<15 + 1, 1, false, RQSizing{}, true},
		{"too many SGEs", 1, 33, false, RQSizing{}, true},
		{"on an SRQ", 16, 1, true, RQSizing{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RQSize(tt.wr, tt.sge, tt.srq, lim)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestSRQSize follows srq.c mlx5_alloc_srq_buf without the wait queue.
func TestSRQSize(t *testing.T) {
	tests := []struct {
		name    string
		wr, sge int
		want    SRQSizing
		err     bool
	}{
		{"100x1", 100, 1, SRQSizing{32, 5, 128, 1, 127, 4096}, false},
		{"1x0", 1, 0, SRQSizing{32, 5, 2, 1, 1, 64}, false},
		// 16+64 = 80 -> 128-byte WQEs holding 7 segments.
		{"255x4", 255, 4, SRQSizing{128, 7, 256, 7, 255, 32768}, false},
		{"0 WRs", 0, 1, SRQSizing{}, true},
		{"too many WRs", 1<<15 + 1, 1, SRQSizing{}, true},
		{"too many SGEs", 1, 33, SRQSizing{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SRQSize(tt.wr, tt.sge, lim)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestCQSize follows verbs.c create_cq (ncqe = align_queue_size(cqe+1))
// and cq.c mlx5_alloc_cq_buf (page-aligned buffer).
func TestCQSize(t *testing.T) {
	tests := []struct {
		name    string
		cqe, sz int
		want    CQSizing
		err     bool
	}{
		{"1", 1, 64, CQSizing{2, 64, 1, 4096}, false},
		{"255", 255, 64, CQSizing{256, 64, 255, 16384}, false},
		{"256", 256, 64, CQSizing{512, 64, 511, 32768}, false},
		{"100 of 128 B", 100, 128, CQSizing{128, 128, 127, 16384}, false},
		{"2^24-1", 1<<24 - 1, 64, CQSizing{1 << 24, 64, 1<<24 - 1, 1 << 30}, false},
		{"2^24", 1 << 24, 64, CQSizing{}, true},
		{"0", 0, 64, CQSizing{}, true},
		{"96-byte CQE", 8, 96, CQSizing{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CQSize(tt.cqe, tt.sz, 4096)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestQPBuffer: verbs.c mlx5_calc_wq_size puts the RQ at 0 and the SQ
// after it; the buffer is page-aligned.
func TestQPBuffer(t *testing.T) {
	sq, _ := SQSize(RC, true, 16, 1, 0, lim)
	rq, _ := RQSize(16, 1, false, lim)
	off, n := QPBuffer(sq, rq, 4096)
	if off != 256 || n != 8192 {
		t.Errorf("QPBuffer = %d, %d; want SQ at 256 of 8192 bytes", off, n)
	}
	off, n = QPBuffer(sq, RQSizing{}, 4096)
	if off != 0 || n != 4096 {
		t.Errorf("QPBuffer without RQ = %d, %d; want 0, 4096", off, n)
	}
}
