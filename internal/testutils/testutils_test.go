package testutils

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestMain(m *testing.M) { Main(m) }

func TestLeakedFDs(t *testing.T) {
	tests := []struct {
		name          string
		before, after map[int]string
		want          []string
	}{
		{"none", map[int]string{0: "/dev/null"}, map[int]string{0: "/dev/null"}, nil},
		{"closed is fine", map[int]string{0: "/dev/null", 5: "socket:[1]"}, map[int]string{0: "/dev/null"}, nil},
		{
			"new and reused",
			map[int]string{0: "/dev/null", 5: "socket:[1]"},
			map[int]string{0: "/dev/null", 5: "socket:[2]", 9: "/dev/infiniband/uverbs0", 7: "pipe:[3]"},
			[]string{"5 -> socket:[2]", "7 -> pipe:[3]", "9 -> /dev/infiniband/uverbs0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := leakedFDs(tt.before, tt.after)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("leakedFDs mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenFDsSeesNewFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("open descriptors are listed from /proc on Linux only")
	}
	before, err := openFDs()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	after, err := openFDs()
	if err != nil {
		t.Fatal(err)
	}
	leaked := leakedFDs(before, after)
	want := []string{strconv.Itoa(int(f.Fd())) + " -> " + os.DevNull}
	if diff := cmp.Diff(want, leaked); diff != "" {
		t.Errorf("leak report mismatch (-want +got):\n%s", diff)
	}
}

// TestLeakHelper leaks what TESTUTILS_LEAK names; TestMainReportsLeaks
// runs it in a child process. It skips when run directly.
func TestLeakHelper(t *testing.T) {
	switch os.Getenv("TESTUTILS_LEAK") {
	case "fd":
		if _, err := os.Open(os.DevNull); err != nil {
			t.Fatal(err)
		}
	case "goroutine":
		block := make(chan struct{})
		go func() { <-block }()
	default:
		t.Skip("runs only as the child of TestMainReportsLeaks")
	}
}

func TestMainReportsLeaks(t *testing.T) {
	tests := []struct {
		leak, report string
	}{
		{"fd", "file descriptor(s) leaked by the tests:\n\tfd "},
		{"goroutine", "goroutines leaked by the tests"},
	}
	for _, tt := range tests {
		t.Run(tt.leak, func(t *testing.T) {
			if tt.leak == "fd" && runtime.GOOS != "linux" {
				t.Skip("descriptors are counted on Linux only")
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestLeakHelper$")
			cmd.Env = append(os.Environ(), "TESTUTILS_LEAK="+tt.leak)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("child exited with %v, want status 1; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.report) || !strings.Contains(string(out), "FAIL: leak check") {
				t.Errorf("child output does not report the leak (%q):\n%s", tt.report, out)
			}
		})
	}
}
