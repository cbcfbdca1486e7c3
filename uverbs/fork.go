package uverbs

import (
	"errors"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/purerdma/rdma/internal/rdmanl"
	"github.com/purerdma/rdma/internal/sys"
)

// ForkMode says how registered memory is protected from fork.
type ForkMode int

const (
	// ForkDontFork: registered pages are marked MADV_DONTFORK (not
	// inherited by child processes) while registered.
	ForkDontFork ForkMode = iota
	// ForkUnneeded: the kernel copies pinned pages on fork; registered
	// memory is left as it is and children inherit it normally.
	ForkUnneeded
)

func (m ForkMode) String() string {
	switch m {
	case ForkDontFork:
		return "dontfork"
	case ForkUnneeded:
		return "unneeded"
	}
	return "ForkMode(" + strconv.Itoa(int(m)) + ")"
}

// ForkSafety reports how registered memory is protected from fork in
// this process, the counterpart of rdma-core's ibv_fork_init and
// ibv_is_fork_initialized. It is safe to call from any goroutine.
//
// A memory region pins its pages: the device reads and writes them by
// physical address. When a process forked and its memory became
// copy-on-write, the parent's first write used to move the parent to a
// fresh copy of the page while the device kept using the old one, now
// the child's. Linux fixed this (commits 70e806e4e645, "mm: Do early cow
// for pinned pages during fork() for ptes", and 4eae4efa2c29, "hugetlb: do
// early cow when page pinned on src mm"): fork now copies pinned pages for
// the child at once and the parent keeps them. Since Linux 5.13 the kernel
// says so over RDMA netlink: RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK = 1 in its
// answer to RDMA_NLDEV_CMD_SYS_GET. That is the question rdma-core asks
// (get_copy_on_fork in libibverbs/ibdev_nl.c) to return
// IBV_FORK_UNNEEDED, and the one asked here, once per process.
//
// With ForkUnneeded, registration leaves memory alone. Otherwise (an older
// kernel, or one that could not be asked) ForkSafety returns ForkDontFork
// and every registration marks the page-aligned range it covers
// MADV_DONTFORK, so that a child gets no mapping there at all, until the
// last region covering a page is deregistered and the page is marked
// MADV_DOFORK again; overlapping regions are counted per page, as
// rdma-core does after ibv_fork_init. AccessOnDemand regions are not
// pinned and are never marked.
//
// Only a definite answer is cached: the kernel's attribute, its absence
// (a kernel before 5.13), or the kernel's refusal of SYS_GET (before
// 5.3). Without RDMA netlink (ib_core not loaded) ForkSafety answers
// ForkDontFork and asks again next time.
//
// What ForkDontFork means for Go programs: marks cover whole pages, so
// with Go heap memory the neighbours of a registered slice are not
// inherited either. os/exec is not affected, since on Linux its child
// shares the parent's memory (CLONE_VM|CLONE_VFORK) until it calls exec;
// a SysProcAttr that asks for a new user namespace turns that off, and
// its child may then fault on the missing pages before exec. Register
// Buffer memory (AllocBuffer), which shares no page with Go objects, when
// that matters.
func ForkSafety() ForkMode {
	forkProbe.mu.Lock()
	defer forkProbe.mu.Unlock()
	if forkProbe.known {
		return forkProbe.mode
	}
	mode, definite, _ := probeForkMode(querySystem)
	if definite {
		forkProbe.mode, forkProbe.known = mode, true
	}
	return mode
}

var forkProbe struct {
	mu    sync.Mutex
	known bool
	mode  ForkMode
}

// probeForkMode runs query (the RDMA netlink SYS_GET) and decides. It
// reports whether the answer is definite: a kernel's answer, or its
// refusal of a request it does not know, is; a failure to ask is not.
func probeForkMode(query func() (rdmanl.System, error)) (mode ForkMode, definite bool, err error) {
	st, err := query()
	if err != nil {
		// The kernel refusing SYS_GET (before 5.3) is an answer; not
		// reaching it is not.
		var oe *rdmanl.OpError
		return ForkDontFork, errors.As(err, &oe) && oe.Kernel, err
	}
	if st.CopyOnFork {
		return ForkUnneeded, true, nil
	}
	return ForkDontFork, true, nil
}

// querySystem asks RDMA netlink for the subsystem's settings.
func querySystem() (rdmanl.System, error) {
	c, err := rdmanl.Dial()
	if err != nil {
		return rdmanl.System{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c.System()
}

// forkRanges counts, per page, the registrations that marked it
// MADV_DONTFORK, and makes the madvise calls when a page's count leaves
// or reaches zero. Disjoint, sorted, merged spans with their counts.
type forkRanges struct {
	mu    sync.Mutex
	spans []forkSpan
}

type forkSpan struct {
	start, end uint64 // [start, end), page aligned
	n          int
}

// pinned is the process's set of DONTFORK ranges.
var pinned forkRanges

// madvise calls, replaceable by tests.
var (
	madvDontFork = sys.DontFork
	madvDoFork   = sys.DoFork
)

// pageRange rounds [addr, addr+length) out to whole pages.
func pageRange(addr, length uint64) (start, end uint64) {
	ps := uint64(os.Getpagesize())
	return addr &^ (ps - 1), (addr + length + ps - 1) &^ (ps - 1)
}

// protect marks the pages under [addr, addr+length) DONTFORK, counting
// overlaps. On failure nothing is left changed.
func (f *forkRanges) protect(addr, length uint64) error {
	start, end := pageRange(addr, length)
	f.mu.Lock()
	defer f.mu.Unlock()
	fresh := f.edges(start, end, +1)
	for i, s := range fresh {
		if err := madvDontFork(s.start, s.end-s.start); err != nil {
			for _, u := range fresh[:i] {
				madvDoFork(u.start, u.end-u.start)
			}
			return err
		}
	}
	f.add(start, end, +1)
	return nil
}

// release undoes one protect of the same range: pages no registration
// covers any more are marked DOFORK again. Every page is tried; the first
// error is returned.
func (f *forkRanges) release(addr, length uint64) error {
	start, end := pageRange(addr, length)
	f.mu.Lock()
	defer f.mu.Unlock()
	var first error
	for _, s := range f.edges(start, end, -1) {
		if err := madvDoFork(s.start, s.end-s.start); err != nil && first == nil {
			first = err
		}
	}
	f.add(start, end, -1)
	return first
}

// edges lists the parts of [start, end) whose count would cross zero if
// delta were added: uncovered parts for +1, parts counted once for -1.
func (f *forkRanges) edges(start, end uint64, delta int) []forkSpan {
	var out []forkSpan
	at := start
	for _, s := range f.spans {
		if s.end <= at {
			continue
		}
		if s.start >= end {
			break
		}
		if delta > 0 && s.start > at {
			out = appendSpan(out, at, s.start, 0)
		}
		if delta < 0 && s.n == 1 {
			out = appendSpan(out, max(s.start, at), min(s.end, end), 0)
		}
		at = min(s.end, end)
	}
	if delta > 0 && at < end {
		out = appendSpan(out, at, end, 0)
	}
	return out
}

// add adds delta to the count of every page in [start, end).
func (f *forkRanges) add(start, end uint64, delta int) {
	// Cut points: every span boundary and the range's own.
	cuts := []uint64{start, end}
	for _, s := range f.spans {
		cuts = append(cuts, s.start, s.end)
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
	var out []forkSpan
	i := 0
	for k := 0; k+1 < len(cuts); k++ {
		lo, hi := cuts[k], cuts[k+1]
		if lo == hi {
			continue
		}
		n := 0
		for i < len(f.spans) && f.spans[i].end <= lo {
			i++
		}
		if i < len(f.spans) && f.spans[i].start <= lo {
			n = f.spans[i].n
		}
		if lo >= start && hi <= end {
			n += delta
		}
		if n > 0 {
			out = appendSpan(out, lo, hi, n)
		}
	}
	f.spans = out
}

// appendSpan appends [start, end) with count n, merging it with the last
// span when they touch and count alike.
func appendSpan(spans []forkSpan, start, end uint64, n int) []forkSpan {
	if k := len(spans) - 1; k >= 0 && spans[k].end == start && spans[k].n == n {
		spans[k].end = end
		return spans
	}
	return append(spans, forkSpan{start, end, n})
}
