package common

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

// MapPMemFile maps path (common_pmem_map_file): a regular file whole,
// which must hold at least minSize bytes, or the first minSize bytes of
// a device such as device DAX. C's libpmem maps a device whole; mapping
// only what the example uses keeps the registration small.
func MapPMemFile(path string, minSize int) (*Mem, error) {
	if minSize <= 0 {
		return nil, fmt.Errorf("mapping %s: size %d", path, minSize)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pmem_map_file() for %s failed\n", path)
		return nil, err
	}
	defer f.Close()
	n := minSize
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if st.Size() < int64(minSize) {
			return nil, fmt.Errorf("mapped size for %s is too small (actual:%d < expected:%d)", path, st.Size(), minSize)
		}
		n = int(st.Size())
	}
	buf, err := uverbs.MapFile(f, n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pmem_map_file() for %s failed\n", path)
		return nil, err
	}
	return &Mem{Buf: buf.Bytes(), IsPMem: true, buffer: buf}, nil
}

// MapPMemAt is common_pmem_map_file_with_signature_check for memory
// that starts offset bytes into path: the signature at offset, then
// size bytes of data at DataOffset (offset plus the signature). If the
// signature is missing, the data is initialized by init (or to an empty
// string) and persisted, then the signature is written and persisted.
// Buf is the whole mapping, from the start of path, as in C.
//
// C initializes the data at twice the offset plus the signature (a
// slip: it adds the offset twice) while it uses it at DataOffset; here
// both are DataOffset. With offset 0, the only one C's servers use,
// the two agree.
func MapPMemAt(path string, offset, size int, init func(b []byte) int) (*Mem, error) {
	if offset < 0 || size <= 0 {
		return nil, fmt.Errorf("mapping %s: offset %d, size %d", path, offset, size)
	}
	total := offset + len(Signature) + size
	m, err := MapPMemFile(path, total)
	if err != nil {
		return nil, err
	}
	m.DataOffset = offset + len(Signature)
	sig := m.Buf[offset:m.DataOffset]
	if string(sig) != Signature {
		data := m.Buf[m.DataOffset:total]
		if init != nil {
			n := init(data)
			if n < 0 {
				m.Close()
				return nil, errors.New("initialization of PMem failed")
			}
			m.Persist(data[:n])
		} else {
			data[0] = 0
			m.Persist(data[:1])
		}
		copy(sig, Signature)
		m.Persist(sig)
	}
	return m, nil
}

// MemAtFor is MemFor for the clients that also take a PMem offset:
// args[i] is the PMem path and args[i+1], when given, the offset
// (strtoul_noerror); without a path, DRAM of size bytes initialized by
// init, with the NO_PMEM message on standard error.
func MemAtFor(args []string, i, size int, init func(b []byte) int) (*Mem, error) {
	if len(args) <= i {
		return MemFor(args, i, size, init)
	}
	offset := uint64(0)
	if len(args) > i+1 {
		offset = StrtoulNoError(args[i+1])
	}
	if offset > 1<<40 {
		return nil, fmt.Errorf("%s: offset %d is too large", args[i], offset)
	}
	return MapPMemAt(args[i], int(offset), size, init)
}

// AdviseFsDAX prefetches a region of PMem on a file system DAX for
// writing, as the examples do after registering it (rpma_mr_advise
// with IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE and IBV_ADVISE_MR_FLAG_FLUSH)
// when the path is not a device DAX. Advice is for regions registered
// with on-demand paging, which FsDAX memory needs; a region registered
// without it (a device that mapped the file's pages directly) takes no
// advice, so none is given: C would call the device, which refuses it.
func AdviseFsDAX(m *Mem, path string, mr *rpma.MR) error {
	if !m.IsPMem || strings.Contains(path, "/dev/dax") || mr.Verbs().Access()&uverbs.AccessOnDemand == 0 {
		return nil
	}
	return mr.Advise(0, mr.Size(), uverbs.AdvisePrefetchWrite, uverbs.AdviseFlush)
}

// MemForAt is MemFor with MapPMemAt's offset.
func MemForAt(args []string, i, offset, size int, init func(b []byte) int) (*Mem, error) {
	if len(args) > i {
		return MapPMemAt(args[i], offset, size, init)
	}
	return MemFor(args, i, size, init)
}
