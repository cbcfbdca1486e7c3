package main

import (
	"fmt"
	"strings"
)

// longOption is one entry of getopt_long's table; every option of the
// example takes an argument (has_arg = 1).
type longOption struct {
	name string
	val  byte
}

type option struct {
	c   byte
	arg string
}

// getoptLong parses argv as the listing's getopt_long loop does, with
// glibc's rules and messages (printed to stderr): operands may come
// before options (glibc permutes them), "--" ends the options, short
// options group and take attached or separate arguments, a long option
// may be abbreviated to a unique prefix and take "=value" or the next
// word. ok is false after the first error, where the listing prints
// its usage and exits.
func getoptLong(argv []string, short string, long []longOption) (opts []option, operands []string, ok bool) {
	prog := argv[0]
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			return opts, append(operands, argv[i+1:]...), true
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			var match []longOption
			for _, l := range long {
				if l.name == name {
					match = []longOption{l}
					break
				}
				if strings.HasPrefix(l.name, name) {
					match = append(match, l)
				}
			}
			switch {
			case len(match) == 0:
				eprintf("%s: unrecognized option '--%s'\n", prog, a[2:])
				return opts, operands, false
			case len(match) > 1:
				msg := fmt.Sprintf("%s: option '--%s' is ambiguous; possibilities:", prog, name)
				for _, m := range match {
					msg += " '--" + m.name + "'"
				}
				eprintf("%s\n", msg)
				return opts, operands, false
			}
			if !hasVal {
				if i+1 >= len(argv) {
					eprintf("%s: option '--%s' requires an argument\n", prog, match[0].name)
					return opts, operands, false
				}
				i++
				val = argv[i]
			}
			opts = append(opts, option{match[0].val, val})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				k := strings.IndexByte(short, c)
				if c == ':' || k < 0 {
					eprintf("%s: invalid option -- '%c'\n", prog, c)
					return opts, operands, false
				}
				if k+1 >= len(short) || short[k+1] != ':' {
					opts = append(opts, option{c: c})
					continue
				}
				switch {
				case j+1 < len(a):
					opts = append(opts, option{c, a[j+1:]})
				case i+1 < len(argv):
					i++
					opts = append(opts, option{c, argv[i]})
				default:
					eprintf("%s: option requires an argument -- '%c'\n", prog, c)
					return opts, operands, false
				}
				break
			}
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, true
}
