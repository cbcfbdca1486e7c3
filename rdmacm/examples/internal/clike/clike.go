// Package clike holds what the manual's rdma_cm examples take from the
// C libraries, so that their Go ports read their command lines and report
// errors as the C programs do: getopt(3) as glibc implements it (with
// its messages), atoi(3) and strtoul(3), and the errno a failed call
// left; from librdmacm, rdma_event_str, the errno its calls leave and
// what its rdma_get_*_comp count as a completion; and the VERB_ERR macro
// the chapter 8 listings share.
package clike

import (
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Opt is one option getopt returned: its letter and its argument; Letter
// '?' is an unknown option or one missing its argument (getopt printed
// the message).
type Opt struct {
	Letter byte
	Arg    string
}

// Getopt parses args (args[0] is the program name) against optstring as
// glibc's getopt does by default: options may follow operands (glibc
// permutes), "--" ends the options, letters may be grouped ("-sa
// host"), an argument may be attached ("-p5") or follow. Errors are
// printed to stderr as glibc prints them, and end the parse: the last
// option is then Letter '?' (the manual's programs print their usage
// and exit there). It returns the options in order and the operands.
func Getopt(stderr io.Writer, args []string, optstring string) (opts []Opt, operands []string) {
	prog := args[0]
	takes := func(c byte) (known, arg bool) {
		if c == ':' || c == '?' {
			return false, false
		}
		i := strings.IndexByte(optstring, c)
		if i < 0 {
			return false, false
		}
		return true, i+1 < len(optstring) && optstring[i+1] == ':'
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			operands = append(operands, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			operands = append(operands, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			known, hasArg := takes(c)
			if !known {
				fmt.Fprintf(stderr, "%s: invalid option -- '%c'\n", prog, c)
				return append(opts, Opt{Letter: '?'}), operands
			}
			if !hasArg {
				opts = append(opts, Opt{Letter: c})
				continue
			}
			if j+1 < len(a) {
				opts = append(opts, Opt{Letter: c, Arg: a[j+1:]})
			} else if i+1 < len(args) {
				i++
				opts = append(opts, Opt{Letter: c, Arg: args[i]})
			} else {
				fmt.Fprintf(stderr, "%s: option requires an argument -- '%c'\n", prog, c)
				return append(opts, Opt{Letter: '?'}), operands
			}
			break
		}
	}
	return opts, operands
}

// Atoi is atoi(3): leading white space, a sign, then decimal digits up
// to the first other byte; 0 when there are none. Like glibc's, it
// keeps the low 32 bits of a long.
func Atoi(s string) int {
	return int(int32(Strtol(s, 10)))
}

// Strtol is strtol(3) without its end pointer, for base 10 or 0 (0x
// hexadecimal, 0 octal, else decimal), saturating as glibc does.
func Strtol(s string, base int) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if base == 0 {
		switch {
		case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hexDigit(s[2]) >= 0:
			base, s = 16, s[2:]
		case len(s) > 0 && s[0] == '0':
			base = 8
		default:
			base = 10
		}
	}
	var v uint64
	over := false
	for i := 0; i < len(s); i++ {
		d := hexDigit(s[i])
		if d < 0 || d >= base {
			break
		}
		if v > (1<<63)/uint64(base) {
			over = true
		}
		v = v*uint64(base) + uint64(d)
		if v > 1<<63 {
			over = true
		}
	}
	switch {
	case over && neg:
		return -1 << 63
	case over || (!neg && v == 1<<63):
		return 1<<63 - 1
	case neg:
		return -int64(v)
	}
	return int64(v)
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return -1
}

// Errno is the errno in err's chain (the library's errors keep the
// kernel's), or fallback when there is none. The library wraps a
// syscall.Errno; it is found by its kind, as only the few packages of
// raw kernel access import syscall (internal/layering).
func Errno(err error, fallback int) int {
	var found int
	var walk func(error) bool
	walk = func(e error) bool {
		for e != nil {
			t := reflect.TypeOf(e)
			if t.PkgPath() == "syscall" && t.Name() == "Errno" {
				found = int(reflect.ValueOf(e).Uint())
				return true
			}
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			case interface{ Unwrap() []error }:
				for _, x := range u.Unwrap() {
					if walk(x) {
						return true
					}
				}
				return false
			default:
				return false
			}
		}
		return false
	}
	if err != nil && walk(err) {
		return found
	}
	return fallback
}
