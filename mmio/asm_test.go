//go:build amd64 || arm64

package mmio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"unsafe"
)

// The barrier instructions each function must contain, per doc.go.
var (
	sfence = []byte{0x0f, 0xae, 0xf8}
	lfence = []byte{0x0f, 0xae, 0xe8}
)

// arm64 barriers: DSB/DMB with the option in CRm (bits 8-11).
func arm64Barrier(dsb bool, crm uint32) []byte {
	ins := uint32(0xd50330bf) // DMB
	if dsb {
		ins = 0xd503309f
	}
	return binary.LittleEndian.AppendUint32(nil, ins|crm<<8)
}

var wantInstructions = map[string]map[string][]byte{
	"amd64": {
		"WriteBarrier":  sfence,
		"ReadBarrier":   lfence,
		"copy64":        sfence,
		"doorbell":      sfence,
		"recordCopy64":  sfence,
		"recordCopy128": sfence,
		// inline_amd64.s (elsewhere they are Go around recordCopy64/128)
		"RecordInlineCopy64":  sfence,
		"RecordInlineCopy128": sfence,
	},
	"arm64": {
		"WriteBarrier":  arm64Barrier(true, 14),  // DSB ST
		"ReadBarrier":   arm64Barrier(false, 13), // DMB LD
		"storeUint32BE": arm64Barrier(false, 3),  // DMB OSH
		"storeUint64BE": arm64Barrier(false, 2),  // DMB OSHST
		"copy64":        arm64Barrier(true, 14),  // DSB ST
		"doorbell":      arm64Barrier(true, 14),  // DSB ST
		"recordCopy64":  arm64Barrier(true, 14),  // DSB ST
		"recordCopy128": arm64Barrier(true, 14),  // DSB ST
	},
}

// wantCount is how many times a function holds its barrier when that
// is more than once: the fused sequences have two write barriers.
var wantCount = map[string]int{"doorbell": 2, "recordCopy64": 2, "recordCopy128": 2, "RecordInlineCopy64": 2, "RecordInlineCopy128": 2}

// TestBarrierInstructions reads the assembly functions' machine code
// and checks each holds the barrier doc.go names, so a barrier cannot be
// lost silently (they change nothing a single-threaded test could
// observe). go test strips the symbol table, so the code is found from
// the function values: a Go func value of an assembly function points at
// a wrapper that calls it.
func TestBarrierInstructions(t *testing.T) {
	want := wantInstructions[runtime.GOARCH]
	for _, tt := range []struct {
		name string
		fn   any
	}{
		{"WriteBarrier", WriteBarrier},
		{"ReadBarrier", ReadBarrier},
		{"storeUint32BE", storeUint32BE},
		{"storeUint64BE", storeUint64BE},
		{"copy64", copy64},
		{"doorbell", doorbell},
		{"recordCopy64", recordCopy64},
		{"recordCopy128", recordCopy128},
		{"RecordInlineCopy64", RecordInlineCopy64},
		{"RecordInlineCopy128", RecordInlineCopy128},
	} {
		ins, ok := want[tt.name]
		if !ok {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			b, err := asmCode(tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, ins) {
				t.Errorf("%s (% x) does not contain % x", tt.name, b, ins)
			}
			if n, want := bytes.Count(b, ins), wantCount[tt.name]; n < want {
				t.Errorf("%s (% x) holds % x %d times, not %d", tt.name, b, ins, n, want)
			}
		})
	}
}

// asmCode returns the machine code of the assembly function behind fn.
func asmCode(fn any) ([]byte, error) {
	pc := reflect.ValueOf(fn).Pointer()
	f := runtime.FuncForPC(pc)
	if f == nil {
		return nil, fmt.Errorf("no function at %#x", pc)
	}
	name := f.Name()
	entry := f.Entry()
	// Look for the call into a function of the same name (the ABI0 body).
	wrapper := codeAt(entry, 64)
	for i := 0; i < len(wrapper); i++ {
		target, ok := callTarget(entry, wrapper, i)
		if !ok || target == entry {
			continue
		}
		if g := runtime.FuncForPC(target); g != nil && g.Name() == name && g.Entry() == target {
			entry = target
			break
		}
	}
	// The function ends where the next one begins.
	n := 0
	for g := runtime.FuncForPC(entry + uintptr(n)); g != nil && g.Entry() == entry && n < 1024; g = runtime.FuncForPC(entry + uintptr(n)) {
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: empty function", name)
	}
	return codeAt(entry, n), nil
}

// callTarget decodes a call or a tail jump at code[i] (code starts at
// pc).
func callTarget(pc uintptr, code []byte, i int) (uintptr, bool) {
	switch runtime.GOARCH {
	case "amd64": // CALL rel32, JMP rel32
		if (code[i] != 0xe8 && code[i] != 0xe9) || i+5 > len(code) {
			return 0, false
		}
		rel := int32(binary.LittleEndian.Uint32(code[i+1:]))
		return uintptr(int64(pc) + int64(i) + 5 + int64(rel)), true
	case "arm64": // BL imm26, B imm26
		if i%4 != 0 || i+4 > len(code) {
			return 0, false
		}
		ins := binary.LittleEndian.Uint32(code[i:])
		if ins>>26 != 0x25 && ins>>26 != 0x05 {
			return 0, false
		}
		rel := int64(int32(ins<<6)>>6) * 4
		return uintptr(int64(pc) + int64(i) + rel), true
	}
	return 0, false
}

// codeAt views n bytes of the program's text at pc.
func codeAt(pc uintptr, n int) []byte {
	p := *(*unsafe.Pointer)(unsafe.Pointer(&pc))
	return unsafe.Slice((*byte)(p), n)
}
