package cli

import "strings"

// Opt is one row of a command's option table, as in a getopt_long
// table: -S, --size, and whether it takes a value. What the option
// means stays in the command, which switches on Short.
type Opt struct {
	Short  byte   // 'S' for -S
	Long   string // "size" for --size; "" for none
	HasArg bool   // takes a value: -S64, -S 64, --size=64, --size 64
}

// Getopt is the command line of a command that takes the options of an
// rdma-core tool: what getopt and getopt_long accept. Short options
// bundle (-vVd), a value follows its option attached (-S64, --size=64)
// or as the next argument (-S 64, --size 64; whatever that argument
// is), a long name may be abbreviated to a unique prefix (--ib-d), and
// "--" ends the options. -h and --help ask for the help (ErrHelp), so a
// table has no 'h' or "help" row.
type Getopt struct {
	// Cmd names the command in the messages: "ping", "pingpong rc".
	Cmd  string
	Opts []Opt
	// Permute lets operands come before, among and after the options,
	// as GNU getopt_long permutes them. Without it every argument is an
	// option (rping's "all arguments are flags"): an operand is a usage
	// error.
	Permute bool
	// JSON, if not nil, is set by purerdma's own -json, also spelled
	// --json (the C tools have no such option).
	JSON *bool
}

// The rows Getopt adds to a command's table (jsonOpt with JSON).
var (
	helpOpt = Opt{Short: 'h', Long: "help"}
	jsonOpt = Opt{Long: "json"}
)

// Parse walks args in order, calling set for each option with its value
// ("" for an option without one); an error from set stops the walk and
// is returned. It returns the operands in their order (none without
// Permute). A bad command line is a UsageError naming g.Cmd.
func (g Getopt) Parse(args []string, set func(opt Opt, val string) error) (operands []string, err error) {
	do := func(opt Opt, val string) error {
		switch opt {
		case helpOpt:
			return ErrHelp
		case jsonOpt:
			*g.JSON = true
			return nil
		}
		return set(opt, val)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			for _, a := range args[i+1:] {
				if operands, err = g.operand(operands, a); err != nil {
					return nil, err
				}
			}
			return operands, nil
		case a == "-json" && g.JSON != nil:
			*g.JSON = true
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			opt, err := g.long(a, name)
			if err != nil {
				return nil, err
			}
			switch {
			case opt.HasArg && !hasVal:
				if i+1 == len(args) {
					return nil, UsageError("%s: --%s needs a value", g.Cmd, opt.Long)
				}
				i++
				val = args[i]
			case !opt.HasArg && hasVal:
				return nil, UsageError("%s: --%s takes no value", g.Cmd, opt.Long)
			}
			if err := do(opt, val); err != nil {
				return nil, err
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				opt, ok := g.short(a[j])
				if !ok {
					return nil, UsageError("%s: unknown flag -%c", g.Cmd, a[j])
				}
				val := ""
				if opt.HasArg {
					switch {
					case j+1 < len(a):
						val = a[j+1:]
					case i+1 < len(args):
						i++
						val = args[i]
					default:
						return nil, UsageError("%s: -%c needs a value", g.Cmd, opt.Short)
					}
					j = len(a)
				}
				if err := do(opt, val); err != nil {
					return nil, err
				}
			}
		default:
			if operands, err = g.operand(operands, a); err != nil {
				return nil, err
			}
		}
	}
	return operands, nil
}

// operand adds a to operands, or refuses it without Permute.
func (g Getopt) operand(operands []string, a string) ([]string, error) {
	if !g.Permute {
		return nil, UsageError("%s: unexpected argument %q (all arguments are flags)", g.Cmd, a)
	}
	return append(operands, a), nil
}

// table is g's options and the ones every command has.
func (g Getopt) table() []Opt {
	t := append(g.Opts[:len(g.Opts):len(g.Opts)], helpOpt)
	if g.JSON != nil {
		t = append(t, jsonOpt)
	}
	return t
}

func (g Getopt) short(c byte) (Opt, bool) {
	for _, opt := range g.table() {
		if opt.Short == c && c != 0 {
			return opt, true
		}
	}
	return Opt{}, false
}

// long finds the option arg ("--name" or "--name=value") names, by its
// name or a unique prefix of it.
func (g Getopt) long(arg, name string) (Opt, error) {
	var found []Opt
	for _, opt := range g.table() {
		switch {
		case opt.Long == "":
		case opt.Long == name:
			return opt, nil
		case name != "" && strings.HasPrefix(opt.Long, name):
			found = append(found, opt)
		}
	}
	switch len(found) {
	case 0:
		return Opt{}, UsageError("%s: unknown flag %s", g.Cmd, arg)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, opt := range found {
		names[i] = "--" + opt.Long
	}
	return Opt{}, UsageError("%s: --%s is ambiguous (%s)", g.Cmd, name, strings.Join(names, ", "))
}
