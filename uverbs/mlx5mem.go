package uverbs

import (
	"fmt"
	"math/bits"
	"os"
	"sync"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
)

// Memory the mlx5 device reads and writes directly: queue buffers and
// doorbell records, allocated by the library before the create command
// names them (the kernel pins them), and UAR pages, the device's
// doorbell registers mapped from the command fd.

// mlx5Buf is a page-aligned queue buffer outside the Go heap, kept out
// of child processes (MADV_DONTFORK, as libibverbs does for every
// buffer it hands the device) so a fork cannot move its pages.
type mlx5Buf struct {
	mem []byte
}

func allocMLX5Buf(what string, size int) (*mlx5Buf, error) {
	ps := os.Getpagesize()
	size = (size + ps - 1) &^ (ps - 1)
	mem, err := sys.MmapAnon(size)
	if err != nil {
		return nil, fmt.Errorf("uverbs: mlx5 %s buffer (%d bytes): %w", what, size, err)
	}
	if err := sys.DontFork(uint64(sys.PointerTo(mem)), uint64(size)); err != nil {
		sys.Munmap(mem)
		return nil, err
	}
	return &mlx5Buf{mem: mem}, nil
}

func (b *mlx5Buf) addr() uint64 { return uint64(sys.PointerTo(b.mem)) }

func (b *mlx5Buf) free() error {
	if b == nil || b.mem == nil {
		return nil
	}
	err := sys.Munmap(b.mem)
	b.mem = nil
	return err
}

// mlx5DBSlot is the size of a doorbell record slot: a cache line, as
// libmlx5's allocator (dbrec.c) gives each record its own.
const mlx5DBSlot = 64

// mlx5DBPool hands out doorbell records: 8 bytes each (a QP's receive
// and send counters, or a CQ's consumer index and arm word), one per
// cache line of shared pages. The kernel pins a record's page for each
// queue that names it.
type mlx5DBPool struct {
	mu    sync.Mutex
	pages []*mlx5DBPage
}

type mlx5DBPage struct {
	buf  *mlx5Buf
	used []uint64 // bitmap of the slots in use
	n    int      // slots in use
}

// mlx5DBRec is one doorbell record.
type mlx5DBRec struct {
	page *mlx5DBPage
	slot int
	mem  []byte // the record's 8 bytes (the slot's first)
}

func (r *mlx5DBRec) addr() uint64 { return uint64(sys.PointerTo(r.mem)) }

func (p *mlx5DBPool) get() (*mlx5DBRec, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pg := range p.pages {
		if r := pg.take(); r != nil {
			return r, nil
		}
	}
	buf, err := allocMLX5Buf("doorbell record", os.Getpagesize())
	if err != nil {
		return nil, err
	}
	slots := len(buf.mem) / mlx5DBSlot
	pg := &mlx5DBPage{buf: buf, used: make([]uint64, (slots+63)/64)}
	// Slots past the page's end never count as free.
	for i := slots; i < len(pg.used)*64; i++ {
		pg.used[i/64] |= 1 << (i % 64)
		pg.n++
	}
	p.pages = append(p.pages, pg)
	return pg.take(), nil // a new page has free slots
}

// take returns a free record of the page, or nil when it is full.
func (pg *mlx5DBPage) take() *mlx5DBRec {
	for w, bitsUsed := range pg.used {
		if bitsUsed == ^uint64(0) {
			continue
		}
		b := bits.TrailingZeros64(^bitsUsed)
		pg.used[w] |= 1 << b
		pg.n++
		slot := w*64 + b
		mem := pg.buf.mem[slot*mlx5DBSlot : slot*mlx5DBSlot+8 : slot*mlx5DBSlot+8]
		clear(mem)
		return &mlx5DBRec{page: pg, slot: slot, mem: mem}
	}
	return nil
}

// put frees a record; a page with no record left is unmapped.
func (p *mlx5DBPool) put(r *mlx5DBRec) error {
	if r == nil || r.page == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pg := r.page
	r.page, r.mem = nil, nil
	pg.used[r.slot/64] &^= 1 << (r.slot % 64)
	pg.n--
	slots := len(pg.buf.mem) / mlx5DBSlot
	if pg.n > len(pg.used)*64-slots {
		return nil
	}
	for i, q := range p.pages {
		if q == pg {
			p.pages = append(p.pages[:i], p.pages[i+1:]...)
			break
		}
	}
	return pg.buf.free()
}

// close unmaps every page (the context is closing: no queue is left).
func (p *mlx5DBPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pg := range p.pages {
		pg.buf.free()
	}
	p.pages = nil
}

// mlx5UAR is a UAR page allocated with MLX5_IB_METHOD_UAR_OBJ_ALLOC
// (dynamic UARs) and mapped from the command fd. Its doorbell and
// BlueFlame registers start at mlx5BFOffset.
type mlx5UAR struct {
	handle uint32
	pageID uint32
	mem    []byte
}

// mlx5BFOffset is where a UAR page's doorbell register (and BlueFlame
// buffer) starts (MLX5_BF_OFFSET).
const mlx5BFOffset = 0x800

// mlx5CQArmOffset is where the CQ arm doorbell is in a UAR page
// (MLX5_CQ_DOORBELL).
const mlx5CQArmOffset = 0x20

func (p *mlx5Provider) allocUAR(nc bool) (*mlx5UAR, error) {
	typ := uint64(abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF)
	what := "BlueFlame"
	if nc {
		typ, what = abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC, "non-cached"
	}
	var off uint64
	var length, pageID uint32
	m := sys.NewMethod("mlx5 UAR_OBJ_ALLOC ("+what+")", abi.MLX5_IB_OBJECT_UAR, abi.MLX5_IB_METHOD_UAR_OBJ_ALLOC)
	h := m.NewHandle(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE)
	m.InUint(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, typ, 8) // CONST_IN: 8 bytes, as rdma-core sends
	m.Out(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, abi.Bytes(&off))
	m.Out(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, abi.Bytes(&length))
	m.Out(abi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, abi.Bytes(&pageID))
	if err := p.ctx.exec(m); err != nil {
		return nil, err
	}
	u := &mlx5UAR{handle: uint32(m.Result(h)), pageID: pageID}
	if length < mlx5BFOffset+512 {
		p.destroyUAR(u.handle)
		return nil, &sys.Error{Op: "mlx5 UAR_OBJ_ALLOC", Err: fmt.Errorf("kernel reported a %d-byte UAR", length)}
	}
	mem, err := p.ctx.fd.Mmap("mlx5 map UAR", int64(off), int(length))
	if err != nil {
		p.destroyUAR(u.handle)
		return nil, err
	}
	u.mem = mem
	return u, nil
}

func (p *mlx5Provider) destroyUAR(handle uint32) error {
	m := sys.NewMethod("mlx5 UAR_OBJ_DESTROY", abi.MLX5_IB_OBJECT_UAR, abi.MLX5_IB_METHOD_UAR_OBJ_DESTROY)
	m.Handle(abi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, handle)
	return p.ctx.exec(m)
}

func (p *mlx5Provider) freeUAR(u *mlx5UAR) error {
	if u == nil {
		return nil
	}
	var err error
	if u.mem != nil {
		err = sys.Munmap(u.mem)
		u.mem = nil
	}
	if e := p.destroyUAR(u.handle); err == nil {
		err = e
	}
	return err
}
