package abigen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/purerdma/rdma/internal/cmd/genabi/cdwarf"
)

type typeKind int

const (
	kindStruct typeKind = iota
	kindUnion
	kindOpaque // a type from another header, kept as bytes
)

// goType is a generated Go type.
type goType struct {
	name   string
	c      *cdwarf.Type
	path   string // cdwarf.Program.Lookup path: "struct ib_uverbs_send_wr.wr"
	anon   bool   // an anonymous C struct or union
	header int    // index in Headers; -1 for opaque types
	kind   typeKind
	hand   bool // declared by a hand-written file: not rendered

	fields   []field    // structs and the storage of unions and opaque types
	access   []accessor // unions
	flex     []flex     // trailing flexible members of structs
	children []*goType  // anonymous types first met in this one
	notes    []string   // comment lines about left-out members
}

// field is a Go struct field.
type field struct {
	name, typ string
	notes     []string
	step      string // the C member: name, or "#i"; "" for padding
	bitfield  bool
}

// accessor is a method of a union returning a pointer to one member.
type accessor struct {
	name, typ string
	notes     []string
	step      string
	hand      bool // declared by a hand-written file
}

// flex is a trailing flexible array member: no Go field, a constant
// with its offset.
type flex struct {
	constName string
	cdesc     string // "__aligned_u64 driver_data[]"
	path      string // steps from the struct: "driver_data", "#6.#0.sge"
	offset    int64
	hand      bool
}

// gen holds the state of one generation.
type gen struct {
	cfg    cdwarf.Config
	prog   *cdwarf.Program
	hand   handWritten
	kernel string

	taken  map[string]string // Go identifier -> what took it
	byC    map[*cdwarf.Type]*goType
	named  []*goType // named types of the headers, in output order
	opaque []*goType
	all    []*goType // every type, in output order

	consts   []constant
	rejected []string
}

// take reserves a package-level Go identifier.
func (g *gen) take(name, what string) error {
	if prev, ok := g.taken[name]; ok {
		return fmt.Errorf("Go name %s of %s is already used by %s: add a spelling to the tables in names.go", name, what, prev)
	}
	g.taken[name] = what
	return nil
}

// free reports whether name is not yet used.
func (g *gen) free(name string) bool {
	_, ok := g.taken[name]
	return !ok
}

// types builds a goType for every struct and union declared in the headers.
func (g *gen) types() error {
	var named []*cdwarf.Type
	for _, t := range g.prog.Types {
		if (t.Kind == cdwarf.Struct || t.Kind == cdwarf.Union) && t.Name != "" && !t.Incomplete && g.headerOf(t.File) >= 0 {
			named = append(named, t)
		}
	}
	// Declaration order, whatever order the compiler emits them in.
	slices.SortStableFunc(named, func(a, b *cdwarf.Type) int {
		if ha, hb := g.headerOf(a.File), g.headerOf(b.File); ha != hb {
			return ha - hb
		}
		return a.Line - b.Line
	})
	// Names first, so that anonymous types can be kept clear of them.
	for _, t := range named {
		gt := &goType{
			name:   goTypeName(t.Name),
			c:      t,
			path:   t.CName(),
			header: g.headerOf(t.File),
			kind:   kindStruct,
		}
		if t.Kind == cdwarf.Union {
			gt.kind = kindUnion
		}
		gt.hand = g.hand.names[gt.name]
		if err := g.take(gt.name, gt.path); err != nil {
			return err
		}
		g.byC[t] = gt
		g.named = append(g.named, gt)
	}
	for _, gt := range g.named {
		if err := g.build(gt); err != nil {
			return err
		}
	}
	var walk func(t *goType)
	walk = func(t *goType) {
		g.all = append(g.all, t)
		for _, c := range t.children {
			walk(c)
		}
	}
	for _, t := range g.named {
		walk(t)
	}
	slices.SortFunc(g.opaque, func(a, b *goType) int { return strings.Compare(a.name, b.name) })
	g.all = append(g.all, g.opaque...)
	return nil
}

func (g *gen) build(gt *goType) error {
	switch gt.kind {
	case kindStruct:
		return g.buildStruct(gt)
	case kindUnion:
		return g.buildUnion(gt)
	}
	return nil
}

// step names member i of t in a Lookup path.
func step(m *cdwarf.Member, i int) string {
	if m.Name != "" {
		return m.Name
	}
	return "#" + strconv.Itoa(i)
}

// memberGoName is the Go name of a member; an anonymous member is named
// after its first named member, recursively: union { __u64 data; __s64
// data_s64; } -> Data.
func memberGoName(m *cdwarf.Member) string {
	for m.Name == "" {
		t := m.Type.Resolve()
		if len(t.Members) == 0 {
			return "Anon"
		}
		m = t.Members[0]
	}
	return goName(m.Name)
}

// uniqueField makes name unique among the fields (or accessors) used.
func uniqueField(used map[string]bool, name string) string {
	n := name
	for i := 2; used[n]; i++ {
		n = name + strconv.Itoa(i)
	}
	used[n] = true
	return n
}

// isZeroSize reports whether a member takes no bytes: [] and [0] arrays,
// empty structs, and unions or structs of those (__DECLARE_FLEX_ARRAY).
func isZeroSize(m *cdwarf.Member) bool {
	return m.BitSize == 0 && m.Type.Size == 0
}

// alignField is a zero-size field that gives a Go struct alignment a.
func alignField(a int64) (field, error) {
	switch a {
	case 2, 4, 8:
		return field{name: "_", typ: fmt.Sprintf("[0]uint%d", a*8)}, nil
	}
	return field{}, fmt.Errorf("no Go type has alignment %d", a)
}

func padField(n int64) field {
	return field{name: "_", typ: fmt.Sprintf("[%d]byte", n)}
}

func (g *gen) buildStruct(gt *goType) error {
	t := gt.c
	ms := t.Members
	last := len(ms)
	for last > 0 && isZeroSize(ms[last-1]) {
		last--
	}
	used := map[string]bool{}
	var off int64
	goAlign := int64(1)
	for i := 0; i < last; i++ {
		m := ms[i]
		st := step(m, i)
		if isZeroSize(m) {
			gt.notes = append(gt.notes, fmt.Sprintf("The zero-size member %s at offset %d is left out.", cdecl(m, st), m.Offset))
			continue
		}
		if m.BitSize > 0 {
			n, err := g.bitfields(gt, ms[i:last], i, &off, used)
			if err != nil {
				return err
			}
			i += n - 1
			continue
		}
		if m.Offset < off {
			return fmt.Errorf("%s: member %s at offset %d overlaps the previous one (ends at %d)", gt.path, st, m.Offset, off)
		}
		if m.Offset > off {
			gt.fields = append(gt.fields, padField(m.Offset-off))
		}
		name := uniqueField(used, memberGoName(m))
		typ, notes, err := g.typeExpr(m.Type, gt, name, st)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", gt.path, st, err)
		}
		if typ == "uint64" && userPointer[m.Name] {
			typ = "Pointer"
			notes = append(notes, "an address in this process that the kernel writes to (sys.PointerTo)")
		}
		a := m.Type.Align
		if m.Offset%a != 0 || a > t.Align {
			notes = append(notes, fmt.Sprintf("C %s at an offset Go would not align it to (packed)", m.Type.CName()))
			typ = fmt.Sprintf("[%d]byte", m.Type.Size)
			a = 1
		}
		gt.fields = append(gt.fields, field{name: name, typ: typ, notes: notes, step: st})
		off = m.Offset + m.Type.Size
		goAlign = max(goAlign, a)
	}
	for i := last; i < len(ms); i++ {
		if err := g.flexLeaves(gt, ms[i], step(ms[i], i), ms[i].Offset); err != nil {
			return err
		}
	}
	if t.Size > off {
		gt.fields = append(gt.fields, padField(t.Size-off))
	}
	if t.Align > goAlign {
		f, err := alignField(t.Align)
		if err != nil {
			return fmt.Errorf("%s: %w", gt.path, err)
		}
		gt.fields = append([]field{f}, gt.fields...)
		goAlign = t.Align
	}
	if goAlign != t.Align {
		return fmt.Errorf("%s: C alignment %d, Go alignment would be %d (a packed struct?)", gt.path, t.Align, goAlign)
	}
	if size := roundUp(max(off, t.Size), goAlign); size != t.Size {
		return fmt.Errorf("%s: C size %d, Go size would be %d", gt.path, t.Size, size)
	}
	return nil
}

func roundUp(n, a int64) int64 {
	return (n + a - 1) / a * a
}

// bitfields renders the bitfields starting at ms[0] (member index i) that
// share one storage unit as one field named after the first, and returns
// how many members it took.
func (g *gen) bitfields(gt *goType, ms []*cdwarf.Member, i int, off *int64, used map[string]bool) (int, error) {
	first := ms[0]
	unit := first.Type.Resolve().Size
	if unit != 1 && unit != 2 && unit != 4 && unit != 8 {
		return 0, fmt.Errorf("%s.%s: bitfield of a %d-byte type", gt.path, step(first, i), unit)
	}
	unitOff := first.BitOffset / (unit * 8) * unit
	if unitOff < *off {
		return 0, fmt.Errorf("%s.%s: bitfield shares its storage unit with the member before it", gt.path, step(first, i))
	}
	if unitOff > *off {
		gt.fields = append(gt.fields, padField(unitOff-*off))
	}
	name := uniqueField(used, memberGoName(first))
	var bits []string
	n := 0
	for _, m := range ms {
		if m.BitSize == 0 || m.BitOffset+m.BitSize > (unitOff+unit)*8 {
			break
		}
		lo := m.BitOffset - unitOff*8
		bits = append(bits, fmt.Sprintf("%s: bits %d-%d", step(m, i+n), lo, lo+m.BitSize-1))
		gt.fields = append(gt.fields, field{name: name, step: step(m, i+n), bitfield: true})
		n++
	}
	// One Go field for the unit; the table rows share its name.
	f := &gt.fields[len(gt.fields)-n]
	f.typ = fmt.Sprintf("uint%d", unit*8)
	f.notes = []string{"C bitfields, " + strings.Join(bits, ", ")}
	for j := len(gt.fields) - n + 1; j < len(gt.fields); j++ {
		gt.fields[j].typ = "" // table rows only, not rendered
	}
	*off = unitOff + unit
	return n, nil
}

// flexLeaves records the flexible arrays in a trailing zero-size member:
// the member itself, or the arrays inside an anonymous union or struct
// of them (__DECLARE_FLEX_ARRAY).
func (g *gen) flexLeaves(gt *goType, m *cdwarf.Member, path string, off int64) error {
	t := m.Type.Resolve()
	switch t.Kind {
	case cdwarf.Array:
		name := "Offsetof" + gt.name + goName(m.Name)
		f := flex{constName: name, cdesc: cdecl(m, m.Name), path: path, offset: off, hand: g.hand.names[name]}
		if err := g.take(name, gt.path+"."+path); err != nil {
			return err
		}
		gt.flex = append(gt.flex, f)
		return nil
	case cdwarf.Struct, cdwarf.Union:
		if len(t.Members) == 0 {
			return nil // the empty struct __DECLARE_FLEX_ARRAY puts first
		}
		if m.Name != "" {
			break
		}
		for i, mm := range t.Members {
			if err := g.flexLeaves(gt, mm, path+"."+step(mm, i), off+mm.Offset); err != nil {
				return err
			}
		}
		return nil
	}
	gt.notes = append(gt.notes, fmt.Sprintf("The trailing zero-size member %s at offset %d is left out.", cdecl(m, path), off))
	return nil
}

// cdecl spells a member as a C declaration, for comments.
func cdecl(m *cdwarf.Member, st string) string {
	t := m.Type
	name := m.Name
	if name == "" {
		name = st
	}
	var dims string
	elem := t
	for elem.Kind == cdwarf.Array {
		elem = elem.Elem
	}
	typ := elem.CName()
	if typ == "__u64" && m.Align == 8 {
		typ = "__aligned_u64" // gcc records the typedef as __u64 with an alignment
	}
	for t.Kind == cdwarf.Array {
		if t.Count < 0 {
			dims += "[]"
		} else {
			dims += fmt.Sprintf("[%d]", t.Count)
		}
		t = t.Elem
	}
	return fmt.Sprintf("%s %s%s", typ, name, dims)
}

func (g *gen) buildUnion(gt *goType) error {
	t := gt.c
	used := map[string]bool{}
	for i, m := range t.Members {
		st := step(m, i)
		if isZeroSize(m) {
			gt.notes = append(gt.notes, fmt.Sprintf("The zero-size member %s is left out.", cdecl(m, st)))
			continue
		}
		if m.BitSize > 0 {
			return fmt.Errorf("%s.%s: bitfield in a union", gt.path, st)
		}
		name := uniqueField(used, memberGoName(m))
		typ, notes, err := g.typeExpr(m.Type, gt, name, st)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", gt.path, st, err)
		}
		gt.access = append(gt.access, accessor{name: name, typ: typ, notes: notes, step: st, hand: g.hand.methods[gt.name+"."+name]})
	}
	return g.storage(gt, "_")
}

// storage gives a union or opaque type its bytes and alignment.
func (g *gen) storage(gt *goType, name string) error {
	t := gt.c
	if t.Align > 1 {
		f, err := alignField(t.Align)
		if err != nil {
			return fmt.Errorf("%s: %w", gt.path, err)
		}
		gt.fields = append(gt.fields, f)
	}
	if t.Size%t.Align != 0 {
		return fmt.Errorf("%s: size %d is not a multiple of the alignment %d", gt.path, t.Size, t.Align)
	}
	gt.fields = append(gt.fields, field{name: name, typ: fmt.Sprintf("[%d]byte", t.Size)})
	return nil
}

// userPointer names the 64-bit struct members that carry an address in
// the calling process for the kernel to write to: the type Pointer, not
// a bare uint64, so that only an address made for the purpose fills one.
var userPointer = map[string]bool{"response": true}

// typeExpr is the Go type of a member of C type t in owner, with notes
// for its comment. fieldName and st name anonymous types met on the way.
func (g *gen) typeExpr(t *cdwarf.Type, owner *goType, fieldName, st string) (string, []string, error) {
	var notes []string
	for t.Kind == cdwarf.Typedef {
		switch {
		case strings.HasPrefix(t.Name, "__be"):
			notes = appendOnce(notes, "big-endian")
		case strings.HasPrefix(t.Name, "__le"):
			notes = appendOnce(notes, "little-endian")
		}
		t = t.Elem
	}
	switch t.Kind {
	case cdwarf.Base:
		typ, err := baseType(t)
		return typ, notes, err
	case cdwarf.Enum:
		u := "uint"
		if t.Signed {
			u = "int"
		}
		return fmt.Sprintf("%s%d", u, t.Size*8), append(notes, "C "+t.CName()), nil
	case cdwarf.Pointer:
		if t.Size != 8 {
			return "", nil, fmt.Errorf("%d-byte pointer", t.Size)
		}
		return "uint64", append(notes, "C pointer: "+t.CName()), nil
	case cdwarf.Array:
		if t.Count <= 0 {
			return "", nil, fmt.Errorf("zero-size array %s in the middle of a type", t.CName())
		}
		elem, n, err := g.typeExpr(t.Elem, owner, fieldName, st)
		if err != nil {
			return "", nil, err
		}
		for _, s := range n {
			notes = appendOnce(notes, s)
		}
		return fmt.Sprintf("[%d]%s", t.Count, elem), notes, nil
	case cdwarf.Struct, cdwarf.Union:
		gt, ok := g.byC[t]
		if !ok && t.Name != "" {
			var err error
			if gt, err = g.opaqueType(t); err != nil {
				return "", nil, err
			}
		}
		if gt != nil {
			if gt.kind == kindOpaque {
				notes = append(notes, "opaque: "+t.CName()+" of "+shortFile(t.File))
			}
			return gt.name, notes, nil
		}
		gt, err := g.anonType(t, owner, fieldName, st)
		if err != nil {
			return "", nil, err
		}
		return gt.name, notes, nil
	}
	return "", nil, fmt.Errorf("no Go type for C %s", t.CName())
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// baseType maps a C arithmetic type to Go. Plain char is byte whatever
// its signedness (it differs between amd64 and arm64).
func baseType(t *cdwarf.Type) (string, error) {
	switch {
	case t.Name == "char":
		return "byte", nil
	case t.Name == "_Bool":
		return "bool", nil
	case t.Float && (t.Size == 4 || t.Size == 8):
		return fmt.Sprintf("float%d", t.Size*8), nil
	case t.Float:
	case t.Size == 1 || t.Size == 2 || t.Size == 4 || t.Size == 8:
		if t.Signed {
			return fmt.Sprintf("int%d", t.Size*8), nil
		}
		return fmt.Sprintf("uint%d", t.Size*8), nil
	}
	return "", fmt.Errorf("no Go type for C %s (%d bytes)", t.Name, t.Size)
}

// anonType generates the type of an anonymous struct or union member,
// named after its owner and member: SendWR + WR = SendWRWR.
func (g *gen) anonType(t *cdwarf.Type, owner *goType, fieldName, st string) (*goType, error) {
	name := owner.name + fieldName
	if !g.free(name) {
		kind := "Struct"
		if t.Kind == cdwarf.Union {
			kind = "Union"
		}
		name += kind
		for i := 2; !g.free(name); i++ {
			name = owner.name + fieldName + kind + strconv.Itoa(i)
		}
	}
	gt := &goType{
		name:   name,
		c:      t,
		path:   owner.path + "." + st,
		anon:   true,
		header: owner.header,
		kind:   kindStruct,
	}
	if t.Kind == cdwarf.Union {
		gt.kind = kindUnion
	}
	gt.hand = g.hand.names[name]
	if err := g.take(name, gt.path); err != nil {
		return nil, err
	}
	g.byC[t] = gt
	owner.children = append(owner.children, gt)
	return gt, g.build(gt)
}

// opaqueType generates a stand-in with the size and alignment of a struct
// or union from another header (sockaddr_in6 and the like).
func (g *gen) opaqueType(t *cdwarf.Type) (*goType, error) {
	gt := &goType{
		name:   goTypeName(t.Name),
		c:      t,
		path:   t.CName(),
		header: -1,
		kind:   kindOpaque,
	}
	gt.hand = g.hand.names[gt.name]
	if err := g.take(gt.name, gt.path); err != nil {
		return nil, err
	}
	g.byC[t] = gt
	g.opaque = append(g.opaque, gt)
	return gt, g.storage(gt, "Raw")
}
