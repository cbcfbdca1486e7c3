package mlx5

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

// qbuf is a page-aligned queue buffer outside the Go heap, kept out
// of child processes (MADV_DONTFORK, as libibverbs does for every
// buffer it hands the device) so a fork cannot move its pages.
type qbuf struct {
	mem []byte
}

func allocBuf(what string, size int) (*qbuf, error) {
	ps := os.Getpagesize()
	size = (size + ps - 1) &^ (ps - 1)
	mem, err := sys.MmapAnon(size)
	if err != nil {
		return nil, fmt.Errorf("mlx5 %s buffer (%d bytes): %w", what, size, err)
	}
	if err := sys.DontFork(uint64(sys.PointerTo(mem)), uint64(size)); err != nil {
		sys.Munmap(mem)
		return nil, err
	}
	return &qbuf{mem: mem}, nil
}

func (b *qbuf) addr() uint64 { return uint64(sys.PointerTo(b.mem)) }

func (b *qbuf) free() error {
	if b == nil || b.mem == nil {
		return nil
	}
	err := sys.Munmap(b.mem)
	b.mem = nil
	return err
}

// dbSlot is the size of a doorbell record slot: a cache line, as
// libmlx5's allocator (dbrec.c) gives each record its own.
const dbSlot = 64

// dbPool hands out doorbell records: 8 bytes each (a QP's receive
// and send counters, or a CQ's consumer index and arm word), one per
// cache line of shared pages. The kernel pins a record's page for each
// queue that names it.
type dbPool struct {
	mu    sync.Mutex
	pages []*dbPage
}

type dbPage struct {
	buf  *qbuf
	used []uint64 // bitmap of the slots in use
	n    int      // slots in use
}

// dbRec is one doorbell record.
type dbRec struct {
	page *dbPage
	slot int
	mem  []byte // the record's 8 bytes (the slot's first)
}

func (r *dbRec) addr() uint64 { return uint64(sys.PointerTo(r.mem)) }

func (p *dbPool) get() (*dbRec, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pg := range p.pages {
		if r := pg.take(); r != nil {
			return r, nil
		}
	}
	buf, err := allocBuf("doorbell record", os.Getpagesize())
	if err != nil {
		return nil, err
	}
	slots := len(buf.mem) / dbSlot
	pg := &dbPage{buf: buf, used: make([]uint64, (slots+63)/64)}
	// Slots past the page's end never count as free.
	for i := slots; i < len(pg.used)*64; i++ {
		pg.used[i/64] |= 1 << (i % 64)
		pg.n++
	}
	p.pages = append(p.pages, pg)
	return pg.take(), nil // a new page has free slots
}

// take returns a free record of the page, or nil when it is full.
func (pg *dbPage) take() *dbRec {
	for w, bitsUsed := range pg.used {
		if bitsUsed == ^uint64(0) {
			continue
		}
		b := bits.TrailingZeros64(^bitsUsed)
		pg.used[w] |= 1 << b
		pg.n++
		slot := w*64 + b
		mem := pg.buf.mem[slot*dbSlot : slot*dbSlot+8 : slot*dbSlot+8]
		clear(mem)
		return &dbRec{page: pg, slot: slot, mem: mem}
	}
	return nil
}

// put frees a record; a page with no record left is unmapped.
func (p *dbPool) put(r *dbRec) error {
	if r == nil || r.page == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pg := r.page
	r.page, r.mem = nil, nil
	pg.used[r.slot/64] &^= 1 << (r.slot % 64)
	pg.n--
	slots := len(pg.buf.mem) / dbSlot
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
func (p *dbPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pg := range p.pages {
		pg.buf.free()
	}
	p.pages = nil
}

// uarPage is a UAR page allocated with MLX5_IB_METHOD_UAR_OBJ_ALLOC
// (dynamic UARs) and mapped from the command fd. Its doorbell and
// BlueFlame registers start at bfOffset.
type uarPage struct {
	handle uint32
	pageID uint32
	mem    []byte
}

// bfOffset is where a UAR page's doorbell register (and BlueFlame
// buffer) starts (MLX5_BF_OFFSET).
const bfOffset = 0x800

// provCQArmOffset is where the CQ arm doorbell is in a UAR page
// (MLX5_CQ_DOORBELL).
const provCQArmOffset = 0x20

func (p *Provider) allocUAR(nc bool) (*uarPage, error) {
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
	if err := p.ctx.Exec(m); err != nil {
		return nil, err
	}
	u := &uarPage{handle: uint32(m.Result(h)), pageID: pageID}
	if length < bfOffset+512 {
		p.destroyUAR(u.handle)
		return nil, &sys.Error{Op: "mlx5 UAR_OBJ_ALLOC", Err: fmt.Errorf("kernel reported a %d-byte UAR", length)}
	}
	mem, err := p.ctx.FD().Mmap("mlx5 map UAR", int64(off), int(length))
	if err != nil {
		p.destroyUAR(u.handle)
		return nil, err
	}
	u.mem = mem
	return u, nil
}

func (p *Provider) destroyUAR(handle uint32) error {
	m := sys.NewMethod("mlx5 UAR_OBJ_DESTROY", abi.MLX5_IB_OBJECT_UAR, abi.MLX5_IB_METHOD_UAR_OBJ_DESTROY)
	m.Handle(abi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, handle)
	return p.ctx.Exec(m)
}

func (p *Provider) freeUAR(u *uarPage) error {
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
