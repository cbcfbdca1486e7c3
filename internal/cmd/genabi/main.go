// Command genabi generates internal/abi from the kernel's RDMA UAPI
// headers. It is a maintainer tool: run it from the repository root after
// the headers change (a new linux-libc-dev), and commit the result.
//
//	go run ./internal/cmd/genabi          # rewrite internal/abi/z*.go
//	go run ./internal/cmd/genabi -check   # exit 1 if they are stale
//
// It needs gcc and the headers in /usr/include/rdma (-I puts other
// directories first). See internal/abi/doc.go for what it generates.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/purerdma/rdma/internal/cmd/genabi/abigen"

	"github.com/purerdma/rdma/internal/cmd/modroot"
)

type includeDirs []string

func (d *includeDirs) String() string     { return strings.Join(*d, ",") }
func (d *includeDirs) Set(s string) error { *d = append(*d, s); return nil }

func main() {
	check := flag.Bool("check", false, "compare instead of writing: exit 1 with a summary if the files differ")
	dir := flag.String("dir", "", "the internal/abi directory (default: found from the module root)")
	cc := flag.String("cc", "gcc", "the C compiler")
	verbose := flag.Bool("v", false, "list the #define names left out")
	var incs includeDirs
	flag.Var(&incs, "I", "an include directory searched before /usr/include (repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./internal/cmd/genabi [-check] [-I dir]...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*dir, *cc, incs, *check, *verbose); err != nil {
		fmt.Fprintf(os.Stderr, "genabi: %v\n", err)
		os.Exit(1)
	}
}

func run(dir, cc string, incs []string, check, verbose bool) error {
	if dir == "" {
		root, err := modroot.Find()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "internal", "abi")
	}
	cfg := abigen.Config()
	cfg.CC = cc
	cfg.IncludeDirs = incs
	res, err := abigen.Generate(abigen.Options{Config: cfg, Dir: dir})
	if err != nil {
		return err
	}
	if verbose {
		fmt.Fprintf(os.Stderr, "genabi: left out (not integer constants): %s\n", strings.Join(res.Rejected, " "))
	}
	if check {
		if err := res.Check(dir); err != nil {
			return err
		}
		fmt.Printf("genabi: %s is up to date (Linux %s headers)\n", dir, res.Kernel)
		return nil
	}
	if err := res.Write(dir); err != nil {
		return err
	}
	fmt.Printf("genabi: wrote %s and %s in %s from the Linux %s headers: %d structs, %d unions, %d opaque types, %d constants, %d flexible-array offsets (%d #defines left out)\n",
		abigen.GoFile, abigen.TestFile, dir, res.Kernel, res.Structs, res.Unions, res.Opaque, res.Constants, res.Flex, len(res.Rejected))
	return nil
}
