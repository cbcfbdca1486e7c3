package common

import (
	"errors"
	"fmt"
	"os"

	"github.com/purerdma/rdma/uverbs"
)

// MapPMemAt is MapPMem with the used part of path starting at offset
// (common_pmem_map_file_with_signature_check with mem->offset set): the
// signature at offset, the payload of size bytes after it.
//
// C's version writes the initial payload at twice the offset plus the
// signature (it adds the offset to a pointer that has it already) while
// reading it at the offset plus the signature; this one writes where it
// reads, as the comment there describes.
func MapPMemAt(path string, offset, size int, init func(b []byte) int) (*Mem, error) {
	if offset < 0 || size <= 0 {
		return nil, fmt.Errorf("%s: offset %d, size %d", path, offset, size)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	total := offset + len(Signature) + size
	n := total
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if st.Size() < int64(total) {
			return nil, fmt.Errorf("%s has too small size (%d < %d)", path, st.Size(), total)
		}
		n = int(st.Size())
	}
	buf, err := uverbs.MapFile(f, n)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	m := &Mem{Buf: buf.Bytes(), DataOffset: offset + len(Signature), IsPMem: true, buffer: buf}
	sig := m.Buf[offset : offset+len(Signature)]
	if string(sig) != Signature {
		data := m.Buf[m.DataOffset:total]
		if init != nil {
			k := init(data)
			if k < 0 {
				buf.Close()
				return nil, errors.New("initialization of PMem failed")
			}
			m.Persist(data[:k])
		} else {
			data[0] = 0
			m.Persist(data[:1])
		}
		copy(sig, Signature)
		m.Persist(sig)
	}
	return m, nil
}

// MemForAt is MemFor with MapPMemAt's offset.
func MemForAt(args []string, i, offset, size int, init func(b []byte) int) (*Mem, error) {
	if len(args) > i {
		return MapPMemAt(args[i], offset, size, init)
	}
	return MemFor(args, i, size, init)
}
