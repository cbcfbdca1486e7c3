package common

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

// Kilobyte is KILOBYTE.
const Kilobyte = 1024

// struct hello_t of common-hello.h: a language (a C enum, 4 bytes in
// host order) and a string of HelloStrSize bytes.
const (
	HelloStrSize   = 1024                          // HELLO_STR_SIZE
	HelloStrOffset = 4                             // offsetof(struct hello_t, str)
	HelloTSize     = HelloStrOffset + HelloStrSize // sizeof(struct hello_t)
)

// The languages of hello_t (enum lang_t) and their greetings.
const (
	LangEN = 0
	LangES = 1
)

var helloStr = [...]string{LangEN: "Hello world!", LangES: "¡Hola Mundo!"}

// WriteHelloStr fills the hello_t in b with the greeting of lang
// (write_hello_str): strncpy pads the string area with zeros.
func WriteHelloStr(b []byte, lang uint32) {
	b[0], b[1], b[2], b[3] = byte(lang), byte(lang>>8), byte(lang>>16), byte(lang>>24)
	s := b[HelloStrOffset:HelloTSize]
	n := copy(s[:HelloStrSize-1], helloStr[lang%uint32(len(helloStr))])
	clear(s[n:])
}

// HelloLang is the hello_t's language.
func HelloLang(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// HelloStr is the hello_t's string.
func HelloStr(b []byte) string { return CString(b[HelloStrOffset:HelloTSize]) }

// Translate switches the hello_t in b to the next language (translate),
// saying so on standard output.
func Translate(b []byte) {
	fmt.Printf("translating...\n")
	WriteHelloStr(b, (HelloLang(b)+1)%uint32(len(helloStr)))
}

// InitHello initializes a hello_t in English at the start of b and
// returns its size (init_hello), or -1 when b is too small.
func InitHello(b []byte) int {
	if len(b) < HelloTSize {
		fmt.Fprintf(os.Stderr, "PMem has too small size (%d < %d)\n", len(b), HelloTSize)
		return -1
	}
	WriteHelloStr(b, LangEN)
	return HelloTSize
}

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

// Strtoul reads a decimal number as C's strtoul does: leading spaces,
// an optional sign (a minus negates modulo 2^64), the digits up to the
// first other character; none is 0. overflow is C's ERANGE.
func Strtoul(s string) (v uint64, overflow bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (^uint64(0)-d)/10 {
			return ^uint64(0), true
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, false
}

// StrtoulNoError is Strtoul that exits as strtoul_noerror does on
// overflow.
func StrtoulNoError(s string) uint64 {
	v, overflow := Strtoul(s)
	if overflow {
		fmt.Fprintf(os.Stderr, "strtoul(%s) overflowed\n", s)
		os.Exit(255)
	}
	return v
}

// CRand is glibc's srand and rand (the additive feedback generator
// random(3) describes, with its default 31 words of state), so that an
// example picks what its C original picks for the same seed.
type CRand struct {
	r    [34]int32 // the last 34 values, a ring
	next int       // the index of the next value in r
}

// NewCRand is srand(seed).
func NewCRand(seed uint32) *CRand {
	if seed == 0 {
		seed = 1
	}
	c := &CRand{}
	var r [344]int32
	r[0] = int32(seed)
	for i := 1; i < 31; i++ {
		// 16807 * r[i-1] % (2^31 - 1), by Schrage's method, as glibc.
		w := int64(r[i-1])
		hi, lo := w/127773, w%127773
		w = 16807*lo - 2836*hi
		if w < 0 {
			w += 2147483647
		}
		r[i] = int32(w)
	}
	for i := 31; i < 34; i++ {
		r[i] = r[i-31]
	}
	// glibc throws the first 310 outputs away.
	for i := 34; i < 344; i++ {
		r[i] = int32(uint32(r[i-31]) + uint32(r[i-3]))
	}
	copy(c.r[:], r[344-34:])
	return c
}

// Rand is rand(): 0 to 2^31-1.
func (c *CRand) Rand() int32 {
	n := len(c.r)
	v := int32(uint32(c.r[(c.next+n-31)%n]) + uint32(c.r[(c.next+n-3)%n]))
	c.r[c.next] = v
	c.next = (c.next + 1) % n
	return int32(uint32(v) >> 1)
}

// ExitStatus ends an example whose C main turns every failure into one
// status (return ret ? -1 : 0, or -2): 0 on success, else the error on
// standard error and status, truncated to a byte as the kernel does.
func ExitStatus(err error, status int) {
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%v\n", err)
	os.Exit(int(uint8(status)))
}

// WaitForWC waits on cq's own channel for the next completion and
// takes it, whatever its status and opcode (rpma_cq_wait and
// rpma_cq_get_wc, for examples that check the completion themselves).
func WaitForWC(ctx context.Context, cq *rpma.CQ, wc *uverbs.WorkCompletion) error {
	for {
		one := sliceOf(wc)
		n, err := cq.GetWC(one)
		if n == 1 {
			*wc = one[0]
			return nil
		}
		if !errors.Is(err, rpma.ErrNoCompletion) {
			return err
		}
		if err := cq.Wait(ctx); err != nil {
			return err
		}
	}
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
