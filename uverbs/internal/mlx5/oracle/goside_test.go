package oracle

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/uverbs"
)

// procMem is this process's memory: the Go provider's buffers and the
// device pages the fake maps.
type procMem struct{}

func ptr(addr uint64) unsafe.Pointer {
	// The addresses are of mappings outside the Go heap or of pinned
	// scratch blocks; convert without a uintptr arithmetic the checker
	// cannot follow.
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

func (procMem) read(addr uint64, n int) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(ptr(addr)), n)...)
}

func (procMem) write(addr uint64, b []byte) { copy(unsafe.Slice((*byte)(ptr(addr)), len(b)), b) }

func (procMem) newFD() (int, error) { return unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK) }

const devNode = "/dev/infiniband/uverbs0"

// goFake puts the device behind internal/sys's command fd.
type goFake struct {
	d   *device
	raw int
}

func (f *goFake) Open(path string) (int, bool, error) {
	if path != devNode {
		return 0, false, nil
	}
	raw, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	f.raw = raw
	return raw, true, err
}

func errOf(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func (f *goFake) Ioctl(raw int, req uintptr, arg uintptr) error { return errOf(f.d.ioctl(uint64(arg))) }

func (f *goFake) Write(raw int, b []byte) (int, error) {
	if e := f.d.writeCmd(append([]byte(nil), b...)); e != 0 {
		return 0, e
	}
	return len(b), nil
}

func (f *goFake) Mmap(raw int, offset int64, length int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	if e := f.d.mmap(uint64(uintptr(unsafe.Pointer(&b[0]))), length, uint64(offset)); e != 0 {
		unix.Munmap(b)
		return nil, e
	}
	return b, nil
}

func (f *goFake) Munmap(b []byte) (bool, error) {
	if len(b) == 0 || !f.d.munmap(uint64(uintptr(unsafe.Pointer(&b[0])))) {
		return false, nil
	}
	return true, unix.Munmap(b)
}

func (f *goFake) Close(raw int) {}

// goRun is a scenario's run through uverbs and its mlx5 provider.
type goRun struct {
	t    *testing.T
	d    *device
	out  strings.Builder
	ctx  *uverbs.Context
	pd   *uverbs.PD
	mrs  []*uverbs.MR
	bufs [][]byte
	cqs  []*uverbs.CQ
	qps  []*uverbs.QP
	srqs []*uverbs.SRQ
	ahs  []*uverbs.AH
	swr  []*uverbs.SendWR
	rwr  []*uverbs.RecvWR

	// afterPost, if set, runs after each PostSend: a test's stand-in for
	// a provider that builds WQEs differently.
	afterPost func(*device)
	// td, if set, is the thread domain of every CQ and QP
	// (scripts/bench-mlx5's lock-free rows).
	td *uverbs.TD
}

// runGo runs a scenario through uverbs on the scripted device: the
// verbs' output in the C driver's format, and the device's record.
func runGo(t *testing.T, scenario string) (string, []string) {
	t.Helper()
	return runGoWith(t, scenario, nil)
}

// runGoWith is runGo with an afterPost hook.
func runGoWith(t *testing.T, scenario string, afterPost func(*device)) (string, []string) {
	t.Helper()
	d := newDevice(procMem{})
	d.eth = isRoCE(scenario)
	r, cleanup := startGo(t, d)
	defer cleanup()
	r.afterPost = afterPost
	for _, l := range strings.Split(scenario, "\n") {
		if err := r.line(l); err != nil {
			t.Fatalf("uverbs: %s: %v\noutput:\n%s\nrecord:\n%s", l, err, r.out.String(), joinLines(d.rec))
		}
	}
	return r.out.String(), d.rec
}

// startGo installs the device behind internal/sys and internal/rdmanl
// for a run; cleanup closes the run and removes them.
func startGo(t *testing.T, d *device) (*goRun, func()) {
	uninstallSys := sys.InstallFake(&goFake{d: d})
	proto := "ib"
	if d.eth {
		proto = "roce"
	}
	uninstallNL := rdmanl.InstallFake(&rdmanl.Fake{
		Devices:  []rdmanl.Device{{Index: 1, Name: "mlx5_0", NodeType: 1, Protocol: proto, PortCount: 1}},
		Chardevs: map[uint32]rdmanl.Chardev{1: {Name: "uverbs0", ABI: 1, DriverID: driverMLX5}},
		System:   rdmanl.System{CopyOnFork: true},
	})
	r := &goRun{t: t, d: d}
	return r, func() {
		r.close()
		uninstallNL()
		uninstallSys()
	}
}

func (r *goRun) close() {
	if r.ctx != nil {
		r.ctx.Close()
	}
	for _, b := range r.bufs {
		unix.Munmap(b)
	}
}

func (r *goRun) printf(format string, args ...any) { fmt.Fprintf(&r.out, format, args...) }

func atoi(s string) int { n, _ := strconv.ParseInt(s, 0, 64); return int(n) }

func (r *goRun) sges(s string) []uverbs.SGE {
	if s == "-" {
		return nil
	}
	var l []uverbs.SGE
	for _, tok := range strings.Split(s, ",") {
		f := strings.Split(tok, ":")
		mr, off, n := atoi(f[0]), atoi(f[1]), atoi(f[2])
		key := r.mrs[mr].LKey()
		if len(f) == 4 { // mr:off:len:key, a key of its own
			key = uint32(atoi(f[3]))
		}
		l = append(l, uverbs.SGE{Addr: uint64(uintptr(unsafe.Pointer(&r.bufs[mr][off]))), Length: uint32(n), LKey: key})
	}
	return l
}

var wrOpcodes = map[string]uverbs.WROpcode{
	"send": uverbs.WRSend, "send_imm": uverbs.WRSendWithImm, "send_inv": uverbs.WRSendWithInv,
	"write": uverbs.WRRDMAWrite, "write_imm": uverbs.WRRDMAWriteWithImm, "read": uverbs.WRRDMARead,
	"cas": uverbs.WRAtomicCmpAndSwp, "faa": uverbs.WRAtomicFetchAndAdd,
}

var qpTypes = map[string]uverbs.QPType{"RC": uverbs.QPTypeRC, "UC": uverbs.QPTypeUC, "UD": uverbs.QPTypeUD}

// cx prints as C's %#x does.
func cx(v uint64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%#x", v)
}

// ibvWCFlags turns the kernel's completion flags into libibverbs' bits.
func ibvWCFlags(f uverbs.WCFlags) uint64 {
	var v uint64
	if f&uverbs.WCWithGRH != 0 {
		v |= 1
	}
	if f&uverbs.WCWithImm != 0 {
		v |= 2
	}
	if f&uverbs.WCIPCsumOK != 0 {
		v |= 4
	}
	if f&uverbs.WCWithInv != 0 {
		v |= 8
	}
	return v
}

func (r *goRun) postResult(what string, q int, err error) {
	if err == nil {
		r.printf("%s %d ok\n", what, q)
		return
	}
	var pe *uverbs.PostError
	if errors.As(err, &pe) {
		r.printf("%s %d fail bad=%d\n", what, q, pe.Index)
		return
	}
	r.printf("%s %d fail bad=0\n", what, q)
}

func (r *goRun) line(l string) error {
	f := strings.Fields(l)
	if len(f) == 0 || strings.HasPrefix(f[0], "#") {
		return nil
	}
	var err error
	switch f[0] {
	case "roce": // the device's port is RoCE (runGo)
	case "open":
		ll := "InfiniBand"
		if r.d.eth {
			ll = "Ethernet"
		}
		dev := uverbs.Device{Name: "mlx5_0", UverbsName: "uverbs0", DevPath: devNode, NodeType: uverbs.NodeCA,
			ABIVersion: 6, DriverABIVersion: 1, DriverName: "mlx5_core",
			Ports: []uverbs.Port{{Num: 1, State: uverbs.PortActive, LinkLayer: ll}}}
		if r.ctx, err = dev.Open(nil); err != nil {
			return err
		}
		if os.Getenv("PURERDMA_ORACLE_BENCH_TD") == "1" {
			if r.td, err = r.ctx.AllocTD(); err != nil {
				return err
			}
		}
		r.printf("open mlx5_0\n")
	case "pd":
		r.pd, err = r.ctx.AllocPD()
	case "mr":
		n := atoi(f[1])
		b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return err
		}
		for i := range b {
			b[i] = byte(i*7 + len(r.mrs))
		}
		mr, err := r.pd.RegMR(b, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteAtomic)
		if err != nil {
			return err
		}
		r.bufs, r.mrs = append(r.bufs, b), append(r.mrs, mr)
	case "cq":
		cq, err := r.ctx.CreateCQ(uverbs.CQConfig{Size: atoi(f[1]), TD: r.td})
		if err != nil {
			return err
		}
		r.printf("cq %d cqe=%d\n", len(r.cqs), cq.Size())
		r.cqs = append(r.cqs, cq)
	case "srq":
		s, err := r.pd.CreateSRQ(uverbs.SRQConfig{MaxWR: uint32(atoi(f[1])), MaxSGE: uint32(atoi(f[2]))})
		if err != nil {
			return err
		}
		a, err := s.Query()
		if err != nil {
			return err
		}
		r.printf("srq %d max_wr=%d max_sge=%d\n", len(r.srqs), a.MaxWR, a.MaxSGE)
		r.srqs = append(r.srqs, s)
	case "qp":
		cfg := uverbs.QPConfig{Type: qpTypes[f[1]], SendCQ: r.cqs[atoi(f[2])], RecvCQ: r.cqs[atoi(f[3])],
			Cap: uverbs.QPCap{MaxSendWR: uint32(atoi(f[5])), MaxRecvWR: uint32(atoi(f[6])), MaxSendSGE: uint32(atoi(f[7])),
				MaxRecvSGE: uint32(atoi(f[8])), MaxInlineData: uint32(atoi(f[9]))},
			SignalAll: f[10] == "1", TD: r.td}
		if f[4] != "-" {
			cfg.SRQ = r.srqs[atoi(f[4])]
		}
		qp, err := r.pd.CreateQP(cfg)
		if err != nil {
			return err
		}
		c := qp.Cap()
		r.printf("qp %d send_wr=%d recv_wr=%d send_sge=%d recv_sge=%d inline=%d\n", len(r.qps),
			c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE, c.MaxRecvSGE, c.MaxInlineData)
		r.qps = append(r.qps, qp)
	case "rts":
		return r.rts(r.qps[atoi(f[1])], qpTypes[f[2]])
	case "reset":
		return r.qps[atoi(f[1])].Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState)
	case "ah":
		a := uverbs.AHAttr{DLID: uint16(atoi(f[1])), SL: uint8(atoi(f[2])), PortNum: 1}
		if len(f) > 3 { // with a GRH, as driver.c
			a.IsGlobal = true
			a.GRH = uverbs.GlobalRoute{SGIDIndex: atoi(f[3]), FlowLabel: uint32(atoi(f[4])),
				TrafficClass: uint8(atoi(f[5])), HopLimit: uint8(atoi(f[6]))}
			a.SrcPathBits, a.StaticRate = uint8(atoi(f[7])), uint8(atoi(f[8]))
			for i := range a.GRH.DGID {
				a.GRH.DGID[i] = byte(0xfe - i*3)
			}
		}
		ah, err := r.pd.CreateAH(a)
		if err != nil {
			return err
		}
		r.ahs = append(r.ahs, ah)
	case "wr":
		w := &uverbs.SendWR{Opcode: wrOpcodes[f[1]], WRID: uint64(atoi(f[2])), SGL: r.sges(f[4])}
		for name, fl := range map[string]uverbs.SendFlags{"signaled": uverbs.SendSignaled, "fence": uverbs.SendFence,
			"solicited": uverbs.SendSolicited, "inline": uverbs.SendInline} {
			if strings.Contains(f[3], name) {
				w.Flags |= fl
			}
		}
		for _, kv := range f[5:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "raddr":
				mr, off, _ := strings.Cut(v, ":")
				w.RemoteAddr = uint64(uintptr(unsafe.Pointer(&r.bufs[atoi(mr)][atoi(off)])))
				w.RKey = r.mrs[atoi(mr)].RKey()
			case "imm":
				w.Imm = uint32(atoi(v))
			case "inv":
				w.InvalidateRKey = uint32(atoi(v))
			case "cmp", "add":
				w.CompareAdd = uint64(atoi(v))
			case "swap":
				w.Swap = uint64(atoi(v))
			case "ah":
				w.AH = r.ahs[atoi(v)]
			case "rqpn":
				w.RemoteQPN = uint32(atoi(v))
			case "qkey":
				w.RemoteQKey = uint32(atoi(v))
			default:
				return fmt.Errorf("unknown key %s", k)
			}
		}
		if n := len(r.swr); n > 0 {
			r.swr[n-1].Next = w
		}
		r.swr = append(r.swr, w)
	case "postsend":
		q := atoi(f[1])
		r.postResult("postsend", q, r.qps[q].PostSend(r.swr[0]))
		r.swr = nil
		if r.afterPost != nil {
			r.afterPost(r.d)
		}
		r.d.snap(l)
	case "rwr":
		w := &uverbs.RecvWR{WRID: uint64(atoi(f[1])), SGL: r.sges(f[2])}
		if n := len(r.rwr); n > 0 {
			r.rwr[n-1].Next = w
		}
		r.rwr = append(r.rwr, w)
	case "postrecv", "postsrq":
		q := atoi(f[1])
		if f[0] == "postrecv" {
			err = r.qps[q].PostRecv(r.rwr[0])
		} else {
			err = r.srqs[q].PostRecv(r.rwr[0])
		}
		r.postResult(f[0], q, err)
		r.rwr = nil
		r.d.snap(l)
	case "dev":
		return r.d.step(l)
	case "poll":
		q := atoi(f[1])
		wc := make([]uverbs.WorkCompletion, atoi(f[2]))
		n, err := r.cqs[q].Poll(wc)
		if err != nil {
			return err
		}
		r.printf("poll %d n=%d\n", q, n)
		for _, w := range wc[:n] {
			if w.Status != uverbs.WCSuccess {
				r.printf("wc wr_id=%d status=%d vendor_err=%s qp_num=%s\n", w.WRID, w.Status, cx(uint64(w.VendorErr)), cx(uint64(w.QPNum)))
				continue
			}
			r.printf("wc wr_id=%d status=%d opcode=%d vendor_err=%s byte_len=%d imm=%s qp_num=%s src_qp=%s flags=%s pkey_index=%d slid=%d sl=%d dlid_path_bits=%d\n",
				w.WRID, w.Status, w.Opcode, cx(uint64(w.VendorErr)), w.ByteLen, cx(uint64(w.Imm)), cx(uint64(w.QPNum)),
				cx(uint64(w.SrcQP)), cx(ibvWCFlags(w.Flags)), w.PKeyIndex, w.SLID, w.SL, w.DLIDPathBits)
		}
		r.d.snap(l)
	case "bench":
		qp, cq, n := r.qps[atoi(f[1])], r.cqs[atoi(f[2])], atoi(f[3])
		post := benchPosts[f[4]]
		if post == nil {
			return fmt.Errorf("bench: unknown request kind %q", f[4])
		}
		wc := make([]uverbs.WorkCompletion, 1)
		for range n {
			if err := post(qp, r.swr[0]); err != nil {
				return err
			}
			if err := r.d.step(fmt.Sprintf("dev cqe cq=%s qp=%s op=req wqe=last", f[2], f[1])); err != nil {
				return err
			}
			if k, err := pollHit(cq, wc); k != 1 || err != nil || wc[0].Status != uverbs.WCSuccess {
				return fmt.Errorf("bench: poll: %d %v %v", k, err, wc[0].Status)
			}
			if k, err := pollEmpty(cq, wc); k != 0 || err != nil {
				return fmt.Errorf("bench: empty poll: %d %v", k, err)
			}
		}
		r.swr = nil
		r.printf("bench %s %d\n", f[4], n)
	case "resize":
		cq := r.cqs[atoi(f[1])]
		res := "ok"
		if err := cq.Resize(atoi(f[2])); err != nil {
			res = "fail"
		}
		r.printf("resize %s %s cqe=%d\n", f[1], res, cq.Size())
		r.d.snap(l)
	case "arm":
		if err := r.cqs[atoi(f[1])].RequestNotify(f[2] == "1"); err != nil {
			return err
		}
		r.d.snap(l)
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return err
}

// rts moves a QP to RTS with the attributes driver.c uses.
func (r *goRun) rts(qp *uverbs.QP, typ uverbs.QPType) error {
	a := uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1}
	mask := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort
	if typ == uverbs.QPTypeUD {
		a.QKey = 0x11111111
		mask |= uverbs.QPAttrQKey
	} else {
		a.AccessFlags = uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
		if typ == uverbs.QPTypeUC {
			a.AccessFlags = uverbs.AccessRemoteWrite
		}
		mask |= uverbs.QPAttrAccessFlags
	}
	if err := qp.Modify(&a, mask); err != nil {
		return err
	}
	a = uverbs.QPAttr{State: uverbs.QPStateRTR}
	mask = uverbs.QPAttrState
	if typ != uverbs.QPTypeUD {
		a.PathMTU, a.DestQPNum, a.AHAttr = uverbs.MTU1024, 0x99, uverbs.AHAttr{DLID: 7, PortNum: 1}
		mask |= uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
		if typ == uverbs.QPTypeRC {
			a.MaxDestRdAtomic, a.MinRNRTimer = 1, 12
			mask |= uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
		}
	}
	if err := qp.Modify(&a, mask); err != nil {
		return err
	}
	a = uverbs.QPAttr{State: uverbs.QPStateRTS}
	mask = uverbs.QPAttrState | uverbs.QPAttrSQPSN
	if typ == uverbs.QPTypeRC {
		a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = 14, 7, 7, 1
		mask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
	}
	return qp.Modify(&a, mask)
}

// The measured calls of the bench command, one function per kind of
// request so that callgrind counts each apart (scripts/bench-mlx5), as
// testdata/driver.c does.
var benchPosts = map[string]func(*uverbs.QP, *uverbs.SendWR) error{
	"send": postSend, "send_inline": postSendInline, "send_imm": postSendImm, "write": postWrite,
	"write_inline": postWriteInline, "read": postRead, "cas": postCAS, "faa": postFAA,
	"send_inline_nokey": postSendInlineNoKey, "write_inline_nokey": postWriteInlineNoKey,
}

//go:noinline
func postSend(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func postSendInline(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func postSendImm(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func postWrite(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func postWriteInline(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

// The inline posts again with a key no MR has: uverbs copies the data
// under its fault net (provider.Spans covers only registered memory
// named by its key); libmlx5 ignores the key.
//
//go:noinline
func postSendInlineNoKey(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func postWriteInlineNoKey(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func postRead(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func postCAS(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func postFAA(qp *uverbs.QP, wr *uverbs.SendWR) error { return qp.PostSend(wr) }

//go:noinline
func pollHit(cq *uverbs.CQ, wc []uverbs.WorkCompletion) (int, error) { return cq.Poll(wc) }

//go:noinline
func pollEmpty(cq *uverbs.CQ, wc []uverbs.WorkCompletion) (int, error) { return cq.Poll(wc) }
