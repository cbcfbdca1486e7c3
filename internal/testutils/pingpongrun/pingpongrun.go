// Package pingpongrun is what the tests that run purerdma pingpong
// against rdma-core's ibv_{rc,uc,ud,srq}_pingpong share: finding the C
// tool and a RoCE v2 GID index, knowing when a server listens, and
// reading the addresses and summary lines both print.
package pingpongrun

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/purerdma/rdma/testenv"
)

// CTool finds rdma-core's ibv_KIND_pingpong. Its absence fails the test
// where the environment promises the tools (the VM), and skips it
// elsewhere.
func CTool(t testing.TB, kind string) string {
	t.Helper()
	name := "ibv_" + kind + "_pingpong"
	p, err := exec.LookPath(name)
	if err != nil {
		if testenv.RequireDevice() {
			t.Fatalf("PURERDMA_REQUIRE_DEVICE=1 but rdma-core's %s is missing (scripts/install-deps installs ibverbs-utils): %v", name, err)
		}
		t.Skipf("rdma-core's %s is not installed: %v", name, err)
	}
	return p
}

// GIDIndex finds the index of dev's port 1 RoCE v2 GID that carries an
// IPv4 address (::ffff:a.b.c.d), from sysfs as the C tools' users would.
func GIDIndex(t testing.TB, dev, wantIP string) int {
	t.Helper()
	dir := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	for i := 0; i < 256; i++ {
		typ, err := os.ReadFile(filepath.Join(dir, "gid_attrs/types", strconv.Itoa(i)))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil || strings.TrimSpace(string(typ)) != "RoCE v2" {
			continue // an empty entry has no type (EINVAL)
		}
		s, err := os.ReadFile(filepath.Join(dir, "gids", strconv.Itoa(i)))
		if err != nil {
			continue
		}
		ip := net.ParseIP(strings.TrimSpace(string(s)))
		if ip != nil && ip.To4() != nil && ip.String() == wantIP {
			return i
		}
	}
	t.Fatalf("%s: no RoCE v2 GID for %s on port 1", dev, wantIP)
	return -1
}

// Listening reports whether a TCP socket listens on port, from
// /proc/net/tcp and tcp6 (state 0A): the way to know a server is ready
// without connecting to it, which would use up its one accept.
func Listening(port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// The lines of the examples' output the tests read: the address lines
// (LocalRE and RemoteRE capture LID, QPN, PSN and GID), the summary
// lines, and ibv_ud_pingpong's local address line, which has ": GID".
var (
	LocalRE   = regexp.MustCompile(`(?m)^  local address:  LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6})[,:] GID (\S+)$`)
	RemoteRE  = regexp.MustCompile(`(?m)^  remote address: LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6}), GID (\S+)$`)
	BytesRE   = regexp.MustCompile(`(?m)^(\d+) bytes in (\d+\.\d\d) seconds = (\d+\.\d\d|inf) Mbit/sec$`)
	ItersRE   = regexp.MustCompile(`(?m)^(\d+) iters in (\d+\.\d\d) seconds = (\d+\.\d\d) usec/iter$`)
	UDLocalRE = regexp.MustCompile(`(?m)^  local address:  LID 0x[0-9a-f]{4}, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}: GID `)
)

// Addresses lists the "LID QPN PSN GID" of the lines re matches.
func Addresses(out string, re *regexp.Regexp) []string {
	var a []string
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		a = append(a, strings.Join(m[1:], " "))
	}
	return a
}
