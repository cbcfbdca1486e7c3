// Package cli is the shape of a purerdma command: each command is a
// package under cmd/purerdma/internal exporting one Command value, which
// main registers (as cmd/go/internal/<command> does for the go tool).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Command is one purerdma command.
type Command struct {
	// Name is the word that selects the command: "res".
	Name string
	// Usage is one or more "  name args   description" lines, printed in
	// purerdma's usage and first in the command's help; the package doc
	// of cmd/purerdma lists the same synopses (a test checks it).
	Usage string
	// Help is what "-h" prints after Usage: the flags and an
	// "Examples:" section of command lines.
	Help string
	// JSON, if the command takes -json, is a value of the type it
	// prints: the package doc of cmd/purerdma lists its JSON keys, and a
	// test checks that list against this type's field tags.
	JSON any
	// Run runs the command with the arguments after its name. It returns
	// an error wrapping ErrUsage for a bad command line (purerdma prints
	// the message and the usage and exits with status 2) and ErrHelp
	// when a -h among its arguments asks for the help.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// ErrUsage marks a command line that cannot be run.
var ErrUsage = errors.New("usage")

// ErrHelp is what Run returns when a -h among its flags asks for the
// command's help.
var ErrHelp = errors.New("help requested")

// UsageError reports a bad command line: the message follows "purerdma:"
// on stderr, then the usage.
func UsageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...)
}

// IsHelpFlag reports whether arg asks for help: -h, -help or --help.
func IsHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// IsJSONFlag reports whether arg asks for JSON output: -json or --json.
func IsJSONFlag(arg string) bool {
	return arg == "-json" || arg == "--json"
}

// Words splits a command line the way the listings (devices, link show,
// res, stat) take theirs: -h, -help, --help or the word "help" anywhere
// ask for the help (ErrHelp), -json or --json for JSON output, another
// word starting with "-" is a usage error that names cmd ("link show:
// unknown flag"), and the other words come back in order.
func Words(cmd string, args []string) (words []string, jsonOut bool, err error) {
	for _, a := range args {
		switch {
		case IsHelpFlag(a) || a == "help":
			return nil, false, ErrHelp
		case IsJSONFlag(a):
			jsonOut = true
		case strings.HasPrefix(a, "-"):
			return nil, false, UsageError("%s: unknown flag %q", cmd, a)
		default:
			words = append(words, a)
		}
	}
	return words, jsonOut, nil
}

// WriteJSON writes v as the one JSON document of an invocation, indented
// by two spaces.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Set is purerdma's commands by name; Run dispatches a command line to
// them.
type Set map[string]Command

// Add adds c; a second command of the same name panics.
func (s Set) Add(c Command) {
	if _, dup := s[c.Name]; dup {
		panic("purerdma: command " + c.Name + " registered twice")
	}
	s[c.Name] = c
}

// Names returns the commands' names in order.
func (s Set) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UsageHeader starts purerdma's usage; the commands' Usage lines, in the
// order of their names, and ExitText follow.
const UsageHeader = `usage: purerdma <command> [arguments]
       purerdma help [command]      (or purerdma <command> -h) for a command's flags and examples

commands:
`

// ExitText documents the exit statuses; it ends the usage and each
// command's help.
const ExitText = `exit status: 0 success, 1 the operation failed, 2 bad command line
`

// Usage is what "purerdma -h" prints: UsageHeader, each command's Usage
// and ExitText.
func (s Set) Usage() string {
	var b strings.Builder
	b.WriteString(UsageHeader)
	for _, n := range s.Names() {
		writeLines(&b, s[n].Usage)
	}
	b.WriteString(ExitText)
	return b.String()
}

// HelpText is what "purerdma NAME -h" prints: the usage lines, the help
// and ExitText.
func (c Command) HelpText() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	writeLines(&b, c.Usage)
	if c.Help != "" {
		b.WriteString("\n")
		writeLines(&b, c.Help)
	}
	b.WriteString("\n")
	b.WriteString(ExitText)
	return b.String()
}

// writeLines writes s and a newline if s does not end with one.
func writeLines(b *strings.Builder, s string) {
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
}

// Run runs the command line args (without the program name) and returns
// the exit status: 0 on success (and for help), 1 when the command
// fails, 2 for a bad command line, whose message and the usage go to
// stderr.
func (s Set) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := s.dispatch(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		if msg := strings.TrimPrefix(err.Error(), ErrUsage.Error()); msg != "" {
			fmt.Fprintf(stderr, "purerdma%s\n", msg)
		}
		io.WriteString(stderr, s.Usage())
		return 2
	default:
		fmt.Fprintf(stderr, "purerdma: %v\n", err)
		return 1
	}
}

func (s Set) dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return ErrUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		io.WriteString(stdout, s.Usage())
		return nil
	case "help":
		switch len(args) {
		case 1:
			io.WriteString(stdout, s.Usage())
			return nil
		case 2:
			c, ok := s[args[1]]
			if !ok {
				return UsageError("help: unknown command %q", args[1])
			}
			io.WriteString(stdout, c.HelpText())
			return nil
		}
		return UsageError("help takes at most one command")
	}
	c, ok := s[args[0]]
	if !ok {
		return UsageError("unknown command %q", args[0])
	}
	if len(args) > 1 && IsHelpFlag(args[1]) {
		io.WriteString(stdout, c.HelpText())
		return nil
	}
	err := c.Run(ctx, args[1:], stdout, stderr)
	if errors.Is(err, ErrHelp) {
		io.WriteString(stdout, c.HelpText())
		return nil
	}
	return err
}

// ParseLink splits "DEV" or "DEV/PORT", the way rdma names a device or
// one of its ports; "" is every device.
func ParseLink(s string) (dev string, port uint32, err error) {
	dev = s
	if d, p, ok := strings.Cut(s, "/"); ok {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil || n == 0 || d == "" {
			return "", 0, UsageError("bad port in %q", s)
		}
		dev, port = d, uint32(n)
	}
	return dev, port, nil
}

// CloseErr adds a Close's error to a result that has none:
//
//	defer cli.CloseErr(&err, c.Close)
func CloseErr(err *error, close func() error) {
	if cerr := close(); *err == nil {
		*err = cerr
	}
}

// Ended is the error of a wait that ctx ended: the context's cause (a
// peer that disconnected, a CM failure, the caller's cancel), else err.
func Ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// CFloat is printf's %.2f, with C's spelling of infinities and NaN, for
// commands whose output matches a C tool's (rstream, rcopy).
func CFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "-nan"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
