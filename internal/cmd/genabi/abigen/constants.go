package abigen

import (
	"fmt"
	"math/bits"
	"regexp"
	"slices"

	"github.com/purerdma/rdma/internal/cmd/genabi/cdwarf"
)

// constant is a generated Go constant with its C name.
type constant struct {
	name   string
	value  cdwarf.Value
	header int
	line   int          // of a #define; of the enum for enumerators
	enum   *cdwarf.Type // nil for a #define
	body   string       // the #define's body
	hex    bool
	hand   bool // declared by a hand-written file
}

// constants collects the #define integer constants and the enumerators of
// the headers, evaluates them with the C probe, and checks the DWARF
// against the compiler: enumerator values, and the size and alignment of
// every named type.
func (g *gen) constants() error {
	defs, err := cdwarf.ScanDefines(g.cfg)
	if err != nil {
		return err
	}
	var exprs []cdwarf.Expr
	seen := map[string]bool{}
	byName := map[string]*cdwarf.Define{}
	for i := range defs {
		d := &defs[i]
		if seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		byName[d.Name] = d
		exprs = append(exprs, cdwarf.Expr{Name: d.Name, C: d.Name})
	}
	var enums []*cdwarf.Type
	for _, t := range g.prog.Types {
		if t.Kind == cdwarf.Enum && g.headerOf(t.File) >= 0 {
			enums = append(enums, t)
			for _, e := range t.Enumerators {
				if !seen[e.Name] {
					exprs = append(exprs, cdwarf.Expr{Name: e.Name, C: e.Name})
				}
			}
		}
	}
	for _, gt := range g.named {
		exprs = append(exprs,
			cdwarf.Expr{Name: "sizeof " + gt.path, C: "sizeof(" + gt.path + ")"},
			cdwarf.Expr{Name: "_Alignof " + gt.path, C: "_Alignof(" + gt.path + ")"})
	}
	vals, rejected, err := cdwarf.Eval(g.cfg, exprs)
	if err != nil {
		return err
	}
	for _, name := range rejected {
		if byName[name] == nil {
			return fmt.Errorf("the C probe rejected %s", name)
		}
		g.rejected = append(g.rejected, name)
	}
	for _, gt := range g.named {
		size, align := vals["sizeof "+gt.path], vals["_Alignof "+gt.path]
		if size != cdwarf.ValueOf(gt.c.Size) || align != cdwarf.ValueOf(gt.c.Align) {
			return fmt.Errorf("%s: DWARF says size %d alignment %d, the compiler %v and %v", gt.path, gt.c.Size, gt.c.Align, size, align)
		}
	}

	// Enumerators and #defines share C's namespace, so their names are
	// unique; an enumerator wins if a macro repeats it.
	done := map[string]bool{}
	for _, t := range enums {
		h := g.headerOf(t.File)
		hex := isFlags(t)
		for _, e := range t.Enumerators {
			v := cdwarf.ValueOf(e.Value)
			if !t.Signed && e.Value < 0 {
				v = cdwarf.Value{Abs: uint64(e.Value)}
			}
			if c, ok := vals[e.Name]; !ok || c != v {
				return fmt.Errorf("enumerator %s: DWARF says %v, the compiler %v", e.Name, v, c)
			}
			if done[e.Name] {
				continue
			}
			done[e.Name] = true
			g.consts = append(g.consts, constant{name: e.Name, value: v, header: h, line: t.Line, enum: t, hex: hex || v.Abs > 0xffff})
		}
	}
	for _, d := range defs {
		v, ok := vals[d.Name]
		if !ok || done[d.Name] {
			continue
		}
		done[d.Name] = true
		g.consts = append(g.consts, constant{name: d.Name, value: v, header: slices.Index(g.cfg.Headers, d.Header), line: d.Line, body: d.Body, hex: hexRE.MatchString(d.Body) || v.Abs > 0xffff})
	}
	slices.SortStableFunc(g.consts, func(a, b constant) int {
		if a.header != b.header {
			return a.header - b.header
		}
		return a.line - b.line
	})
	for i := range g.consts {
		c := &g.consts[i]
		c.hand = g.hand.names[c.name]
		if err := g.take(c.name, "C constant "+c.name); err != nil {
			return err
		}
	}
	return nil
}

// hexRE matches #define bodies written in hex or as shifts.
var hexRE = regexp.MustCompile(`0[xX]|<<`)

// isFlags reports whether an enum looks like a set of bit flags: at least
// three non-zero values, most of them powers of two, some of them large.
// Those are written in hex.
func isFlags(t *cdwarf.Type) bool {
	var nonzero, pow2 int
	var maxv uint64
	for _, e := range t.Enumerators {
		v := uint64(e.Value)
		if v == 0 || e.Value < 0 {
			continue
		}
		nonzero++
		if bits.OnesCount64(v) == 1 {
			pow2++
		}
		maxv = max(maxv, v)
	}
	return nonzero >= 3 && pow2*2 > nonzero && maxv >= 0x10
}
