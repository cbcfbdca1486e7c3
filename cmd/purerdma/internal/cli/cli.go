// Package cli is the shape of a purerdma command: each command is a
// package under cmd/purerdma/internal exporting one Command value, which
// main registers (as cmd/go/internal/<command> does for the go tool).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
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
