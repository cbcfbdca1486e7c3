package uverbs_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/purerdma/rdma/uverbs"
)

// forkExec starts path in a child made by a real fork: clone with
// SIGCHLD only, so the child gets a copy-on-write copy of the address
// space, registered pages included, and runs until it calls execve. This
// is what fork(2) and system(3) do in a C program. os/exec does not: on
// Linux its child shares the parent's memory (CLONE_VM|CLONE_VFORK)
// until exec, and the one way to make it fork for real, a new user
// namespace, is refused in the test VM (its root is a chroot).
//
// Between clone and execve the child runs only raw system calls, which
// neither allocate nor grow the stack; the arguments are built before.
func forkExec(path string) (int, error) {
	argv0, err := syscall.BytePtrFromString(path)
	if err != nil {
		return 0, err
	}
	argv, err := syscall.SlicePtrFromStrings([]string{path})
	if err != nil {
		return 0, err
	}
	envv, err := syscall.SlicePtrFromStrings(nil)
	if err != nil {
		return 0, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syscall.ForkLock.Lock() // no descriptor half made while we fork
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if pid == 0 && errno == 0 {
		// The child.
		syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 127, 0, 0)
	}
	syscall.ForkLock.Unlock()
	runtime.KeepAlive(argv0)
	runtime.KeepAlive(argv)
	runtime.KeepAlive(envv)
	if errno != 0 {
		return 0, fmt.Errorf("clone: %w", errno)
	}
	return int(pid), nil
}

// forkExecWait runs forkExec and waits for the child; it must exit 0.
func forkExecWait(path string) error {
	pid, err := forkExec(path)
	if err != nil {
		return err
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("wait4: %w", err)
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return fmt.Errorf("child %d: status %#x", pid, ws)
	}
	return nil
}

// TestForkDuringTransfers forks and execs children (/bin/true) over and
// over while RDMA reads and writes run between registered Buffers, and
// checks every transfer: the bytes the device read from the parent's
// pages are those the parent wrote last, and the bytes the device wrote
// into them are what the parent reads. A fork that left the device on a
// page the parent no longer sees (copy-on-write after fork) breaks one
// of the two.
//
// It runs in the kernel's fork mode (both VM kernels copy pinned pages
// for the child at fork: ForkUnneeded) and in DONTFORK mode (the child
// gets no mapping of registered pages), each with real forks and with
// os/exec's children.
func TestForkDuringTransfers(t *testing.T) {
	if _, err := os.Stat("/bin/true"); err != nil {
		t.Fatalf("the children are /bin/true: %v", err)
	}
	for _, mode := range []string{"kernel's mode", "DONTFORK"} {
		for _, how := range []string{"fork", "os/exec"} {
			t.Run(mode+"/"+how, func(t *testing.T) {
				// The pair's own heap regions are registered before the
				// mode is forced: in DONTFORK mode their pages, which
				// share the heap with the children's arguments, would
				// vanish from a forked child before it execs.
				a, b := newPair(t, pairOpts{typ: uverbs.QPTypeRC})
				if mode == "DONTFORK" {
					defer uverbs.ForceForkMode(uverbs.ForkDontFork)()
				}
				t.Logf("%s: ForkSafety() = %v", os.Getenv("PURERDMA_VM"), uverbs.ForkSafety())
				forkTransfers(t, a, b, how)
			})
		}
	}
}

// forkTransfers is TestForkDuringTransfers for one pair and one way of
// starting children.
func forkTransfers(t *testing.T, a, b *end, how string) {
	const (
		chunk = 4096
		slots = 16
	)
	reg := func(pd *uverbs.PD) (*uverbs.Buffer, *uverbs.MR) {
		buf, err := uverbs.AllocBuffer(slots * chunk)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := pd.RegBuffer(buf, allAccess)
		if err != nil {
			buf.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			mr.Close()
			buf.Close()
		})
		return buf, mr
	}
	abuf, amr := reg(a.pd)
	bbuf, bmr := reg(b.pd)
	if got, want := hasDontCopy(t, amr.Addr()), uverbs.ForkSafety() == uverbs.ForkDontFork; got != want {
		t.Fatalf("registered Buffer marked DONTFORK: %v, want %v", got, want)
	}
	fill := func(p []byte, seq uint64) {
		for i := 0; i < len(p); i += 8 {
			binary.LittleEndian.PutUint64(p[i:], seq<<16|uint64(i))
		}
	}
	rw := func(wrid uint64, op uverbs.WROpcode, local []byte, remote []byte) {
		t.Helper()
		wr := &uverbs.SendWR{WRID: wrid, Opcode: op, Flags: uverbs.SendSignaled,
			SGL:        []uverbs.SGE{{Addr: amr.Addr() + uint64(offsetIn(abuf.Bytes(), local)), Length: uint32(len(local)), LKey: amr.LKey()}},
			RemoteAddr: bmr.Addr() + uint64(offsetIn(bbuf.Bytes(), remote)), RKey: bmr.RKey()}
		if err := a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		if wc := waitWC(t, a.cq); wc.WRID != wrid {
			t.Fatalf("completion %+v, want wr_id %d", wc, wrid)
		}
	}

	var forks atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	forkErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var err error
			if how == "fork" {
				err = forkExecWait("/bin/true")
			} else {
				err = exec.Command("/bin/true").Run()
			}
			if err != nil {
				forkErr <- err
				return
			}
			forks.Add(1)
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	// At least 200 rounds and 25 children, at most 60 s.
	want := make([]byte, chunk)
	deadline := time.Now().Add(60 * time.Second)
	rounds := 0
	for ; rounds < 200 || forks.Load() < 25; rounds++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds and %d children in 60s", rounds, forks.Load())
		}
		select {
		case err := <-forkErr:
			t.Fatalf("child %d: %v", forks.Load()+1, err)
		default:
		}
		seq := uint64(rounds)
		s := rounds % slots
		// The parent writes a page the device then reads.
		src, dst := abuf.Bytes()[s*chunk:(s+1)*chunk], bbuf.Bytes()[s*chunk:(s+1)*chunk]
		fill(src, seq)
		rw(seq*2, uverbs.WRRDMAWrite, src, dst)
		fill(want, seq)
		if !written(want, dst) { // on iWARP the data may land after the completion
			t.Fatalf("round %d (%d children): the RDMA WRITE did not carry what the parent wrote", rounds, forks.Load())
		}
		// The device writes a page the parent then reads.
		s2 := (rounds + slots/2) % slots
		remote, local := bbuf.Bytes()[s2*chunk:(s2+1)*chunk], abuf.Bytes()[s2*chunk:(s2+1)*chunk]
		fill(remote, seq|1<<40)
		rw(seq*2+1, uverbs.WRRDMARead, local, remote)
		fill(want, seq|1<<40)
		if !bytes.Equal(local, want) {
			t.Fatalf("round %d (%d children): the parent does not see what the RDMA READ wrote", rounds, forks.Load())
		}
	}
	t.Logf("%d rounds of a 4 KiB write and read, %d children (%s) meanwhile", rounds, forks.Load(), how)
}

// offsetIn is the offset of sub in buf, which holds it.
func offsetIn(buf, sub []byte) int { return int(addrOf(sub) - addrOf(buf)) }
