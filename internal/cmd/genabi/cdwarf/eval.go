package cdwarf

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Define is an object-like #define with a non-empty body.
type Define struct {
	Name   string
	Body   string // with comments removed and continuation lines joined
	Header string // as in Config.Headers
	Line   int
}

var defineRE = regexp.MustCompile(`^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)(.*)$`)

// ScanDefines lists the object-like #define lines of cfg.Headers whose body
// is not empty, in header order, then line order. Function-like macros
// (NAME immediately followed by "(") are left out. Whether a body is an
// integer constant expression is for Eval to find out.
func ScanDefines(cfg Config) ([]Define, error) {
	var defs []Define
	for _, h := range cfg.Headers {
		path, err := cfg.HeaderPath(h)
		if err != nil {
			return nil, err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(stripComments(string(src)), "\n")
		for i := 0; i < len(lines); i++ {
			start := i
			line := lines[i]
			for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, "\\") + " " + lines[i]
			}
			m := defineRE.FindStringSubmatch(line)
			if m == nil || strings.HasPrefix(m[2], "(") {
				continue
			}
			body := strings.Join(strings.Fields(m[2]), " ")
			if body == "" {
				continue
			}
			defs = append(defs, Define{Name: m[1], Body: body, Header: h, Line: start + 1})
		}
	}
	return defs, nil
}

// stripComments blanks out C comments, keeping the line breaks so that
// line numbers stay right. String and character literals are copied as
// they are.
func stripComments(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				end = len(s) - i - 2
			}
			b.WriteByte(' ')
			b.WriteString(strings.Repeat("\n", strings.Count(s[i:i+2+end], "\n")))
			i += 2 + end + 1
		case strings.HasPrefix(s[i:], "//"):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return b.String()
			}
			i += end - 1
		case s[i] == '"' || s[i] == '\'':
			q := s[i]
			b.WriteByte(q)
			for i++; i < len(s) && s[i] != q && s[i] != '\n'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					b.WriteByte(s[i])
					i++
				}
				b.WriteByte(s[i])
			}
			if i < len(s) {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// Expr is a C expression to evaluate under Name.
type Expr struct {
	Name string
	C    string
}

// Value is an integer value printed by the C probe.
type Value struct {
	Abs uint64 // the magnitude
	Neg bool
}

// Int64 returns v as an int64 and whether it fits.
func (v Value) Int64() (int64, bool) {
	if v.Neg {
		return -int64(v.Abs), v.Abs <= 1<<63
	}
	return int64(v.Abs), v.Abs < 1<<63
}

func (v Value) String() string {
	if v.Neg {
		return "-" + strconv.FormatUint(v.Abs, 10)
	}
	return strconv.FormatUint(v.Abs, 10)
}

// ValueOf returns the Value of i.
func ValueOf(i int64) Value {
	if i < 0 {
		return Value{Abs: uint64(-i), Neg: true}
	}
	return Value{Abs: uint64(i)}
}

// Eval evaluates each expression, in the context of cfg.Headers, as a C
// integer constant expression. Expressions that are not (they do not
// compile, are not constant, or not integers) are left out of the result
// and listed in rejected, in input order; this is how ScanDefines' bodies
// that are types, strings or nothing useful are dropped.
//
// Each expression is first checked by compiling
//
//	typedef char probe_N[1 + 0 * (EXPR)];
//
// at file scope, which gcc accepts only for integer constant expressions;
// the lines gcc rejects are dropped and the rest compiled again until the
// file compiles. The survivors are then printed by a compiled program.
func Eval(cfg Config, exprs []Expr) (values map[string]Value, rejected []string, err error) {
	dir, err := os.MkdirTemp("", "cdwarf-eval-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)

	ok := make([]bool, len(exprs))
	for i := range ok {
		ok[i] = true
	}
	for round := 0; ; round++ {
		var b strings.Builder
		b.WriteString(cfg.includes())
		first := strings.Count(b.String(), "\n") + 1
		lineOf := map[int]int{} // source line -> expression index
		n := 0
		for i, e := range exprs {
			if !ok[i] {
				continue
			}
			lineOf[first+n] = i
			fmt.Fprintf(&b, "typedef char cdwarf_probe_%d[1 + 0 * (%s)];\n", i, e.C)
			n++
		}
		if n == 0 {
			break
		}
		if err := os.WriteFile(filepath.Join(dir, "check.c"), []byte(b.String()), 0o644); err != nil {
			return nil, nil, err
		}
		out, cerr := cfg.run(dir, "-fsyntax-only", "-fmax-errors=0", "-ftrack-macro-expansion=0", "check.c")
		if cerr == nil {
			break
		}
		bad := 0
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			rest, found := strings.CutPrefix(sc.Text(), "check.c:")
			if !found {
				continue
			}
			f := strings.SplitN(rest, ":", 3)
			if len(f) < 3 || !strings.Contains(f[2], "error") {
				continue
			}
			l, _ := strconv.Atoi(f[0])
			if i, found := lineOf[l]; found && ok[i] {
				ok[i] = false
				bad++
			}
		}
		if bad == 0 || round > 20 {
			return nil, nil, fmt.Errorf("probing constants: %w", cerr)
		}
	}

	var b strings.Builder
	b.WriteString("#include <stdio.h>\n")
	b.WriteString(cfg.includes())
	b.WriteString(`
#define P(name, v) do { \
	if ((v) < 0) \
		printf("%s -%llu\n", name, 0ULL - (unsigned long long)(v)); \
	else \
		printf("%s %llu\n", name, (unsigned long long)(v)); \
} while (0)

int main(void)
{
`)
	for i, e := range exprs {
		if !ok[i] {
			rejected = append(rejected, e.Name)
			continue
		}
		fmt.Fprintf(&b, "\tP(%q, (%s));\n", e.Name, e.C)
	}
	b.WriteString("\treturn 0;\n}\n")
	if err := os.WriteFile(filepath.Join(dir, "eval.c"), []byte(b.String()), 0o644); err != nil {
		return nil, nil, err
	}
	if _, err := cfg.run(dir, "-w", "-o", "eval", "eval.c"); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(filepath.Join(dir, "eval"))
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("running the constant probe: %w", err)
	}
	values = map[string]Value{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		sp := strings.LastIndexByte(sc.Text(), ' ')
		if sp < 0 {
			return nil, nil, fmt.Errorf("constant probe printed %q", sc.Text())
		}
		name, num := sc.Text()[:sp], sc.Text()[sp+1:]
		var v Value
		v.Neg = strings.HasPrefix(num, "-")
		v.Abs, err = strconv.ParseUint(strings.TrimPrefix(num, "-"), 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("constant probe printed %q: %w", sc.Text(), err)
		}
		if v.Abs == 0 {
			v.Neg = false
		}
		values[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	for i, e := range exprs {
		if _, found := values[e.Name]; ok[i] && !found {
			return nil, nil, fmt.Errorf("constant probe printed no value for %s", e.Name)
		}
	}
	return values, rejected, nil
}
