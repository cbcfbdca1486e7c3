// Package cdwarf asks the C compiler about the kernel's UAPI headers: it
// compiles a probe that includes them with debug information and reads the
// type layouts back from the DWARF (Layout), finds the object-like #define
// constants in the header text (ScanDefines), and evaluates integer constant
// expressions by compiling and running a small printf program (Eval).
//
// It is shared by the generator (internal/cmd/genabi) and by the layout
// tests of internal/abi, so that both look at the headers the same way. It
// needs a C compiler (gcc by default) at run time, through os/exec; it
// never uses cgo.
package cdwarf

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Config says which compiler and headers to use.
type Config struct {
	// CC is the C compiler; "gcc" when empty.
	CC string
	// IncludeDirs are searched, in order, before the compiler's own
	// directories (as -I); empty means the system headers only.
	IncludeDirs []string
	// Headers are the headers to include, as in #include <...>,
	// e.g. "rdma/ib_user_verbs.h".
	Headers []string
}

func (c Config) cc() string {
	if c.CC == "" {
		return "gcc"
	}
	return c.CC
}

// sysIncludeDir is where headers are looked for after IncludeDirs.
const sysIncludeDir = "/usr/include"

// Available reports why the probes cannot run here (no compiler, or a
// header missing), or nil when they can.
func (c Config) Available() error {
	if _, err := exec.LookPath(c.cc()); err != nil {
		return fmt.Errorf("C compiler: %w", err)
	}
	for _, h := range c.Headers {
		if _, err := c.HeaderPath(h); err != nil {
			return err
		}
	}
	return nil
}

// HeaderPath finds header h (as in #include <h>) in IncludeDirs, then in
// /usr/include.
func (c Config) HeaderPath(h string) (string, error) {
	for _, dir := range append(append([]string(nil), c.IncludeDirs...), sysIncludeDir) {
		p := filepath.Join(dir, h)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("header <%s> not found in %v", h, append(append([]string(nil), c.IncludeDirs...), sysIncludeDir))
}

// includes is the #include block of every probe.
func (c Config) includes() string {
	var b strings.Builder
	for _, h := range c.Headers {
		fmt.Fprintf(&b, "#include <%s>\n", h)
	}
	return b.String()
}

func (c Config) flags() []string {
	var f []string
	for _, d := range c.IncludeDirs {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs // the compiler runs in a temporary directory
		}
		f = append(f, "-I"+d)
	}
	return f
}

// run runs the compiler in dir; the error carries its output.
func (c Config) run(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command(c.cc(), append(c.flags(), args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w\n%s", c.cc(), strings.Join(cmd.Args[1:], " "), err, out.Bytes())
	}
	return out.Bytes(), nil
}

// Kind is the kind of a C type.
type Kind int

// The kinds of C types. Qualifiers (const, volatile) are looked through.
const (
	Void Kind = iota
	Base
	Struct
	Union
	Enum
	Array
	Typedef
	Pointer
	Func
)

var kindNames = [...]string{"void", "base", "struct", "union", "enum", "array", "typedef", "pointer", "function"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Type is a C type as the compiler laid it out.
type Type struct {
	Kind Kind
	// Name is the tag or typedef or base type name, "" when anonymous.
	Name string
	// Size in bytes; 0 for void, functions and incomplete types.
	Size int64
	// Align is the alignment in bytes: explicit (DW_AT_alignment) or
	// computed from the members the way the C ABI does.
	Align int64
	// File and Line are where the type is declared (named types and
	// anonymous structs, unions and enums).
	File string
	Line int
	// Signed and Float describe base types and the underlying type of
	// enums.
	Signed bool
	Float  bool
	// Elem is the element (arrays), target (typedefs, pointers) or
	// underlying type (enums, when the compiler records it).
	Elem *Type
	// Count is the number of array elements: 0 for [0], -1 for [].
	Count int64
	// Members of structs and unions, in declaration order.
	Members []*Member
	// Enumerators of enums, in declaration order.
	Enumerators []Enumerator
	// Incomplete is set for declarations without a definition.
	Incomplete bool
	// Packed is set for structs that are evidently packed (a member at
	// an offset its alignment does not allow, or a size that is not a
	// multiple of the members' alignment); their Align is then 1. A
	// packed struct whose members all happen to sit aligned is not
	// detected: compare Align with _Alignof where it matters.
	Packed bool
}

// CName is the type as C spells it: "struct foo", "union <anonymous>",
// "__u32", "__u8[16]".
func (t *Type) CName() string {
	name := t.Name
	if name == "" {
		name = "<anonymous>"
	}
	switch t.Kind {
	case Struct, Union, Enum:
		return t.Kind.String() + " " + name
	case Array:
		var dims string
		for ; t.Kind == Array; t = t.Elem {
			if t.Count < 0 {
				dims += "[]"
			} else {
				dims += fmt.Sprintf("[%d]", t.Count)
			}
		}
		return t.CName() + dims
	case Pointer:
		if t.Elem == nil {
			return "void *"
		}
		return t.Elem.CName() + " *"
	case Void:
		return "void"
	case Func:
		return "function"
	}
	return name
}

// Resolve follows typedefs to the type they name.
func (t *Type) Resolve() *Type {
	for t != nil && t.Kind == Typedef {
		t = t.Elem
	}
	return t
}

// Member is a member of a struct or union.
type Member struct {
	// Name is "" for an anonymous struct or union member.
	Name string
	Type *Type
	// Offset in bytes from the start of the enclosing type; for a
	// bitfield, the offset of the byte holding its first bit.
	Offset int64
	// Align is the member's explicit alignment (DW_AT_alignment, as
	// for __aligned_u64), or 0.
	Align int64
	// BitSize and BitOffset describe bitfields: the width and the bit
	// offset from the start of the enclosing type. BitSize is 0 for
	// ordinary members.
	BitSize   int64
	BitOffset int64
}

// Enumerator is one constant of an enum.
type Enumerator struct {
	Name  string
	Value int64
}

// Program is what Layout read from a compiled probe.
type Program struct {
	// Types are the top-level struct, union and enum types, named or
	// not, in the order the compiler emitted them (declaration order).
	Types []*Type
	named map[string]*Type // "struct foo", "union foo", "enum foo"
}

// Named returns the complete type with the given C name ("struct foo",
// "union foo", "enum foo"), or nil.
func (p *Program) Named(cname string) *Type {
	return p.named[cname]
}

// Lookup resolves a path: a C name ("struct foo") followed by member
// steps, each ".name", or ".#i" for the i'th member (counted from 0), as
// anonymous members need. It returns the type at the end of the path and
// the member that reached it (nil for the bare name).
func (p *Program) Lookup(path string) (*Type, *Member, error) {
	parts := strings.Split(path, ".")
	t := p.Named(parts[0])
	if t == nil {
		return nil, nil, fmt.Errorf("%s: no such type", parts[0])
	}
	var m *Member
	for i, step := range parts[1:] {
		rt := t.Resolve()
		for rt.Kind == Array {
			rt = rt.Elem.Resolve()
		}
		m = nil
		if idx, ok := strings.CutPrefix(step, "#"); ok {
			n, err := strconv.Atoi(idx)
			if err != nil || n < 0 || n >= len(rt.Members) {
				return nil, nil, fmt.Errorf("%s: bad member index %q", strings.Join(parts[:i+2], "."), step)
			}
			m = rt.Members[n]
		} else {
			for _, mm := range rt.Members {
				if mm.Name == step {
					m = mm
					break
				}
			}
		}
		if m == nil {
			return nil, nil, fmt.Errorf("%s: no member %q", strings.Join(parts[:i+1], "."), step)
		}
		t = m.Type
	}
	return t, m, nil
}

// Layout compiles a probe that includes cfg.Headers with debug
// information (gcc -g -fno-eliminate-unused-debug-types -c) in a
// temporary directory and reads the types back from its DWARF.
func Layout(cfg Config) (*Program, error) {
	dir, err := os.MkdirTemp("", "cdwarf-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src := "/* Generated by cdwarf: every type of the headers below. */\n" + cfg.includes()
	if err := os.WriteFile(filepath.Join(dir, "probe.c"), []byte(src), 0o644); err != nil {
		return nil, err
	}
	if _, err := cfg.run(dir, "-g", "-fno-eliminate-unused-debug-types", "-c", "-o", "probe.o", "probe.c"); err != nil {
		return nil, err
	}
	f, err := elf.Open(filepath.Join(dir, "probe.o"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("reading DWARF of the probe: %w", err)
	}
	return read(d)
}

// node is a DIE with its children.
type node struct {
	e        *dwarf.Entry
	children []*node
}

type reader struct {
	nodes map[dwarf.Offset]*node
	types map[dwarf.Offset]*Type
	files []*dwarf.LineFile
}

func read(d *dwarf.Data) (*Program, error) {
	r := &reader{nodes: map[dwarf.Offset]*node{}, types: map[dwarf.Offset]*Type{}}
	p := &Program{named: map[string]*Type{}}
	dr := d.Reader()
	var stack []*node
	var top []*node // children of the (first) compile unit
	for {
		e, err := dr.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		if e.Tag == 0 { // end of a list of children
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		n := &node{e: e}
		r.nodes[e.Offset] = n
		if e.Tag == dwarf.TagCompileUnit {
			if r.files != nil {
				return nil, errors.New("probe has more than one compile unit")
			}
			lr, err := d.LineReader(e)
			if err != nil {
				return nil, err
			}
			if lr != nil {
				r.files = lr.Files()
			}
		} else if len(stack) > 0 {
			parent := stack[len(stack)-1]
			parent.children = append(parent.children, n)
			if parent.e.Tag == dwarf.TagCompileUnit {
				top = append(top, n)
			}
		}
		if e.Children {
			stack = append(stack, n)
		}
	}
	for _, n := range top {
		switch n.e.Tag {
		case dwarf.TagStructType, dwarf.TagUnionType, dwarf.TagEnumerationType:
		default:
			continue
		}
		t, err := r.typ(n.e.Offset)
		if err != nil {
			return nil, err
		}
		p.Types = append(p.Types, t)
		if t.Name != "" && !t.Incomplete {
			p.named[t.Kind.String()+" "+t.Name] = t
		}
	}
	return p, nil
}

func intAttr(e *dwarf.Entry, a dwarf.Attr) (int64, bool) {
	switch v := e.Val(a).(type) {
	case int64:
		return v, true
	case uint64:
		return int64(v), true
	}
	return 0, false
}

func (r *reader) declFile(e *dwarf.Entry) string {
	i, ok := intAttr(e, dwarf.AttrDeclFile)
	if !ok || i < 0 || int(i) >= len(r.files) || r.files[i] == nil {
		return ""
	}
	return r.files[i].Name
}

// typ builds the Type of the DIE at off.
func (r *reader) typ(off dwarf.Offset) (*Type, error) {
	if t, ok := r.types[off]; ok {
		return t, nil
	}
	n := r.nodes[off]
	if n == nil {
		return nil, fmt.Errorf("DWARF: no entry at offset %#x", off)
	}
	e := n.e
	switch e.Tag {
	case dwarf.TagConstType, dwarf.TagVolatileType, dwarf.TagRestrictType, dwarf.TagAtomicType:
		ref, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
		if !ok {
			return &Type{Kind: Void}, nil
		}
		return r.typ(ref)
	}
	t := &Type{}
	r.types[off] = t // before recursing: structs may point to themselves
	t.Name, _ = e.Val(dwarf.AttrName).(string)
	t.File = r.declFile(e)
	if l, ok := intAttr(e, dwarf.AttrDeclLine); ok {
		t.Line = int(l)
	}
	size, hasSize := intAttr(e, dwarf.AttrByteSize)
	explicitAlign, _ := intAttr(e, dwarf.AttrAlignment)
	t.Incomplete, _ = e.Val(dwarf.AttrDeclaration).(bool)
	var elem *Type
	if ref, ok := e.Val(dwarf.AttrType).(dwarf.Offset); ok {
		var err error
		if elem, err = r.typ(ref); err != nil {
			return nil, err
		}
	}
	switch e.Tag {
	case dwarf.TagBaseType:
		t.Kind = Base
		t.Size = size
		enc, _ := intAttr(e, dwarf.AttrEncoding)
		switch enc {
		case encSigned, encSignedChar:
			t.Signed = true
		case encFloat:
			t.Float = true
		}
		t.Align = size
	case dwarf.TagTypedef:
		t.Kind = Typedef
		t.Elem = elem
		if elem == nil {
			t.Elem = &Type{Kind: Void}
		}
		t.Size = t.Elem.Size
		t.Align = t.Elem.Align
	case dwarf.TagPointerType:
		t.Kind = Pointer
		t.Elem = elem
		t.Size = size
		t.Align = size
	case dwarf.TagSubroutineType:
		t.Kind = Func
	case dwarf.TagEnumerationType:
		t.Kind = Enum
		t.Size = size
		t.Align = size
		t.Elem = elem
		enc, _ := intAttr(e, dwarf.AttrEncoding)
		t.Signed = enc == encSigned || enc == encSignedChar || (elem != nil && elem.Resolve().Signed)
		for _, c := range n.children {
			if c.e.Tag != dwarf.TagEnumerator {
				continue
			}
			name, _ := c.e.Val(dwarf.AttrName).(string)
			v, ok := intAttr(c.e, dwarf.AttrConstValue)
			if !ok {
				return nil, fmt.Errorf("DWARF: enumerator %s has no value", name)
			}
			if !t.Signed && t.Size < 8 {
				v &= 1<<(8*t.Size) - 1 // data forms are read sign-extended
			}
			t.Enumerators = append(t.Enumerators, Enumerator{Name: name, Value: v})
		}
	case dwarf.TagArrayType:
		if elem == nil {
			return nil, fmt.Errorf("DWARF: array at %#x without element type", off)
		}
		// One subrange per dimension: int a[2][3] is an array of 2
		// arrays of 3.
		var counts []int64
		for _, c := range n.children {
			if c.e.Tag != dwarf.TagSubrangeType {
				continue
			}
			count := int64(-1)
			if v, ok := intAttr(c.e, dwarf.AttrCount); ok {
				count = v
			} else if v, ok := intAttr(c.e, dwarf.AttrUpperBound); ok {
				count = v + 1 // [0] may be written as upper bound -1
			}
			counts = append(counts, count)
		}
		if len(counts) == 0 {
			counts = []int64{-1}
		}
		cur := elem
		for i := len(counts) - 1; i >= 0; i-- {
			a := t
			if i > 0 {
				a = &Type{}
			}
			a.Kind = Array
			a.Elem = cur
			a.Count = counts[i]
			if a.Count > 0 {
				a.Size = a.Count * cur.Size
			}
			a.Align = cur.Align
			cur = a
		}
	case dwarf.TagStructType, dwarf.TagUnionType:
		t.Kind = Struct
		if e.Tag == dwarf.TagUnionType {
			t.Kind = Union
		}
		t.Size = size
		if !hasSize {
			t.Incomplete = true
		}
		t.Align = 1
		for _, c := range n.children {
			if c.e.Tag != dwarf.TagMember {
				continue
			}
			m := &Member{}
			m.Name, _ = c.e.Val(dwarf.AttrName).(string)
			ref, ok := c.e.Val(dwarf.AttrType).(dwarf.Offset)
			if !ok {
				return nil, fmt.Errorf("DWARF: member %s.%s has no type", t.Name, m.Name)
			}
			mt, err := r.typ(ref)
			if err != nil {
				return nil, err
			}
			m.Type = mt
			m.Align, _ = intAttr(c.e, dwarf.AttrAlignment)
			m.Offset, _ = intAttr(c.e, dwarf.AttrDataMemberLoc)
			if bs, ok := intAttr(c.e, dwarf.AttrBitSize); ok {
				m.BitSize = bs
				if dbo, ok := intAttr(c.e, dwarf.AttrDataBitOffset); ok {
					m.BitOffset = dbo
				} else if bo, ok := intAttr(c.e, dwarf.AttrBitOffset); ok {
					// DWARF 2/3, little-endian: counted from the
					// most significant bit of the storage unit.
					unit := mt.Resolve().Size
					if bsz, ok := intAttr(c.e, dwarf.AttrByteSize); ok {
						unit = bsz
					}
					m.BitOffset = m.Offset*8 + unit*8 - bo - bs
				}
				m.Offset = m.BitOffset / 8
			}
			a := mt.Align
			if m.Align > a {
				a = m.Align
			}
			if a > t.Align {
				t.Align = a
			}
			t.Members = append(t.Members, m)
		}
		// gcc records no attribute for __attribute__((packed)); a
		// member the computed alignment does not fit gives it away.
		packed := t.Size%t.Align != 0
		for _, m := range t.Members {
			if m.BitSize == 0 && m.Offset%max(m.Align, m.Type.Align, 1) != 0 {
				packed = true
			}
		}
		if packed && explicitAlign == 0 {
			t.Align = 1
			t.Packed = true
		}
	default:
		return nil, fmt.Errorf("DWARF: unexpected %v at %#x", e.Tag, off)
	}
	if explicitAlign > 0 {
		t.Align = explicitAlign
	}
	return t, nil
}

// DW_ATE_* encodings of base types.
const (
	encFloat      = 0x04
	encSigned     = 0x05
	encSignedChar = 0x06
)
