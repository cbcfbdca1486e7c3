package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/purerdma/rdma/internal/testutils"
)

func TestMain(m *testing.M) { testutils.Main(m) }

const root = "../../.."

// TestGenerated fails while zviews.go is not what genviews makes of
// uverbs' current declarations: a field added to uverbs.SendWR and not
// to its view, for example.
func TestGenerated(t *testing.T) {
	testutils.HostOnly(t)
	want, err := generate(filepath.Join(root, srcDir))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, outFile))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
		t.Errorf("%s is stale: run go generate ./uverbs/internal/provider (-want +got):\n%s", outFile, diff)
	}
}

// TestGenerateEdits runs genviews on copies of uverbs' files with one
// edit each: what a change to a uverbs type does to the views, or why
// genviews refuses it.
func TestGenerateEdits(t *testing.T) {
	testutils.HostOnly(t)
	tests := []struct {
		name     string
		file     string
		old, new string
		want     string // in the output
		wantErr  string
	}{
		{
			name: "a new field",
			file: "wr.go", old: "\tBind *MWBind // BIND_MW\n", new: "\tBind *MWBind // BIND_MW\n\tHint uint16\n",
			want: "\tBind *MWBind // BIND_MW\n\tHint uint16\n\n\tNext *SendWR\n",
		},
		{
			name: "a field of a numeric type without a view",
			file: "wr.go", old: "\tSrcQP        uint32\n", new: "\tSrcQP        NodeType\n",
			want: "\tSrcQP        int // uverbs.NodeType\n",
		},
		{
			name: "a field of a viewed struct type",
			file: "wr.go", old: "\tSGL  []SGE\n\tNext *RecvWR\n", new: "\tSGL  []SGE\n\tLast *WorkCompletion\n\tNext *RecvWR\n",
			want: "\tLast *WC\n",
		},
		{
			name: "a new constant",
			file: "wr.go", old: "\tWRAtomicWrite       WROpcode = 15", new: "\tWRNew WROpcode = 1 + 15\n\tWRAtomicWrite       WROpcode = 15",
			want: "\tWRNew               WROpcode = 1 + 15\n",
		},
		{
			name: "a constant by iota",
			file: "wr.go", old: "\tWCSuccess WCStatus = iota", new: "\tWCSuccess WCStatus = iota + 7",
			want: "const WCSuccess = 7\n",
		},
		{
			name: "a field of a type without a view",
			file: "wr.go", old: "\tBind *MWBind // BIND_MW\n", new: "\tBind *MWBind // BIND_MW\n\tCQ   *CQ\n",
			wantErr: "uverbs.SendWR.CQ: type CQ has no view",
		},
		{
			name: "an unexported field",
			file: "wr.go", old: "\tNext *RecvWR\n", new: "\tNext *RecvWR\n\tspare uint32\n",
			wantErr: "uverbs.RecvWR.spare: an unexported field has no view",
		},
		{
			name: "an AH whose first field is not the provider's",
			file: "ah.go", old: "\tpv provider.AH\n\tresource\n", new: "\tresource\n\tpv provider.AH\n",
			wantErr: "uverbs.AH's first field must be a provider.AH",
		},
		{
			name: "a constant naming another package",
			file: "wr.go", old: "\tWRAtomicWrite       WROpcode = 15", new: "\tWRAtomicWrite       WROpcode = abi.IB_WR_ATOMIC_WRITE",
			wantErr: "evaluating uverbs' constants",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copySource(t)
			path := filepath.Join(dir, tc.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.old) {
				t.Fatalf("%s has no %q", tc.file, tc.old)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(b), tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := generate(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("generate = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("no %q in the output:\n%s", tc.want, out)
			}
		})
	}
}

// copySource copies uverbs' non-test Go files into a new directory.
func copySource(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(root, srcDir)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
