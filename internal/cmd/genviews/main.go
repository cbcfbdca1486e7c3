// Command genviews generates uverbs/internal/provider/zviews.go, the
// providers' views of uverbs' work requests and completions, from
// uverbs' own declarations. It is a maintainer tool: after a change to
// one of those types, run it and commit the result.
//
//	go generate ./uverbs/internal/provider  # runs it
//	go run ./internal/cmd/genviews          # the same, from anywhere in the module
//	go run ./internal/cmd/genviews -check   # exit 1 if zviews.go is stale
//
// TestGenerated (go test ./internal/cmd/genviews) fails while zviews.go
// is not what this command writes. views.go says what is generated.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/purerdma/rdma/internal/cmd/modroot"
)

// The source package and the generated file, from the module root.
const (
	srcDir  = "uverbs"
	outFile = "uverbs/internal/provider/zviews.go"
)

func main() {
	check := flag.Bool("check", false, "compare instead of writing: exit 1 if the file is stale")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./internal/cmd/genviews [-check]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*check); err != nil {
		fmt.Fprintf(os.Stderr, "genviews: %v\n", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	root, err := modroot.Find()
	if err != nil {
		return err
	}
	out, err := generate(filepath.Join(root, srcDir))
	if err != nil {
		return err
	}
	path := filepath.Join(root, outFile)
	if check {
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(old, out) {
			return fmt.Errorf("%s is stale: run go generate ./uverbs/internal/provider", outFile)
		}
		fmt.Printf("genviews: %s is up to date\n", outFile)
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}
