package ping

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParsePingArgs(t *testing.T) {
	def := rpOptions{port: 7174, size: 64}
	with := func(f func(*rpOptions)) rpOptions {
		o := def
		f(&o)
		return o
	}
	tests := []struct {
		args []string
		want rpOptions
	}{
		{[]string{"-s"}, with(func(o *rpOptions) { o.server = true })},
		{[]string{"-c", "-a", "198.18.0.1"}, with(func(o *rpOptions) { o.addr = "198.18.0.1" })},
		{[]string{"-c", "-a198.18.0.1", "-I", "198.18.0.2", "-p", "7200", "-C", "10", "-S", "100", "-v", "-V"},
			with(func(o *rpOptions) {
				o.addr, o.source, o.port, o.count, o.size, o.verbose, o.validate = "198.18.0.1", "198.18.0.2", 7200, 10, 100, true, true
			})},
		// Bundled flags, a value attached to the last one or after it.
		{[]string{"-svVdPq", "-S23"}, with(func(o *rpOptions) {
			o.server, o.verbose, o.validate, o.debug, o.persistent, o.selfQP, o.size = true, true, true, true, true, true, 23
		})},
		{[]string{"-vcC", "3", "-ahost"}, with(func(o *rpOptions) { o.verbose, o.count, o.addr = true, 3, "host" })},
		{[]string{"-sS", "65535", "-a", "::", "-C", "0", "--"}, with(func(o *rpOptions) { o.server, o.size, o.addr = true, 65535, "::" })},
		{[]string{"-s", "-s", "-p", "1"}, with(func(o *rpOptions) { o.server, o.port = true, 1 })},
		{[]string{"-c", "-a", "h", "-json", "-VC5"}, with(func(o *rpOptions) { o.addr, o.json, o.validate, o.count = "h", true, true, 5 })},
		{[]string{"--json", "-sq"}, with(func(o *rpOptions) { o.server, o.json, o.selfQP = true, true, true })},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parsePingArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(rpOptions{})); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPingBadCommandLines: every bad command line exits with 2, the
// message and the usage, before anything touches a device (on a host
// without RDMA, getting further would fail with 1).
func TestPingBadCommandLines(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{nil, "purerdma: ping needs -s (server) or -c (client)"},
		{[]string{"-v"}, "purerdma: ping needs -s (server) or -c (client)"},
		{[]string{"-s", "-c"}, "purerdma: ping: -s and -c exclude each other"},
		{[]string{"-c"}, "purerdma: ping: the client needs the server's address (-a)"},
		{[]string{"-c", "-a", ""}, "purerdma: ping: the client needs the server's address (-a)"},
		{[]string{"-c", "-a", "h", "-I", ""}, "purerdma: ping: empty address"},
		{[]string{"-s", "-a", ""}, "purerdma: ping: empty address"},
		{[]string{"-s", "-I", "198.18.0.2"}, "purerdma: ping: -I (source address) is for the client"},
		{[]string{"-c", "-a", "h", "-P"}, "purerdma: ping: -P (persistent server) is for the server"},
		{[]string{"-c", "-a", "h", "-S", "22"}, "purerdma: ping: invalid size 22 (valid range is 23 to 65535)"},
		{[]string{"-s", "-S0"}, "purerdma: ping: invalid size 0 (valid range is 23 to 65535)"},
		{[]string{"-s", "-S", "65536"}, "purerdma: ping: invalid size 65536 (valid range is 23 to 65535)"},
		{[]string{"-s", "-S", "64k"}, `purerdma: ping: -S "64k": not a decimal number`},
		{[]string{"-c", "-a", "h", "-C", "-1"}, "purerdma: ping: invalid count -1"},
		{[]string{"-c", "-a", "h", "-C", "ten"}, `purerdma: ping: -C "ten": not a decimal number`},
		{[]string{"-s", "-p", "0"}, "purerdma: ping: invalid port 0 (valid range is 1 to 65535)"},
		{[]string{"-s", "-p", "65536"}, "purerdma: ping: invalid port 65536 (valid range is 1 to 65535)"},
		{[]string{"-s", "-p"}, "purerdma: ping: -p needs a value"},
		{[]string{"-c", "-a"}, "purerdma: ping: -a needs a value"},
		{[]string{"-s", "-t", "8"}, "purerdma: ping: unknown flag -t"},
		{[]string{"-sx"}, "purerdma: ping: unknown flag -x"},
		{[]string{"-s", "--size=64"}, "purerdma: ping: unknown flag --size=64"},
		{[]string{"-s", "198.18.0.1"}, `purerdma: ping: unexpected argument "198.18.0.1" (all arguments are flags)`},
		{[]string{"-s", "-"}, `purerdma: ping: unexpected argument "-" (all arguments are flags)`},
		{[]string{"-s", "--", "x"}, `purerdma: ping: unexpected argument "x" (all arguments are flags)`},
		{[]string{"-s", "-json", "-v"}, "purerdma: ping: -json prints only a summary: it does not go with -v (the ping data)"},
		{[]string{"-c", "-a", "h", "-json", "-vV"}, "purerdma: ping: -json prints only a summary: it does not go with -v (the ping data)"},
		{[]string{"-sP", "--json"}, "purerdma: ping: -json prints one connection's summary: it does not go with -P (a server that runs until stopped)"},
		{[]string{"-s", "-jsonx"}, "purerdma: ping: unknown flag -j"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runContext(context.Background(), append([]string{"ping"}, tt.args...), &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit status %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if diff := cmp.Diff(tt.msg+"\n"+usage(), stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPingHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-s", "-h"}, {"-vh"}, {"-s", "--help"}} {
		var stdout, stderr bytes.Buffer
		code := runContext(context.Background(), append([]string{"ping"}, args...), &stdout, &stderr)
		if code != 0 || stdout.String() != Command.HelpText() || stderr.Len() != 0 {
			t.Errorf("ping %q = %d, stdout %q, stderr %q; want 0 and the help", args, code, stdout.String(), stderr.String())
		}
	}
	if !strings.Contains(usage(), "\n  ping -s|-c ") {
		t.Errorf("the usage does not list ping:\n%s", usage())
	}
}

// TestPingBadAddress: a name that does not resolve fails with 1 and says
// which flag it came from.
func TestPingBadAddress(t *testing.T) {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	code := runContext(ctx, []string{"ping", "-c", "-a", "no-such-host.invalid"}, &stdout, &stderr)
	if want := "purerdma: ping: -a no-such-host.invalid: invalid hostname or IP address: "; code != 1 || !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("ping -c -a no-such-host.invalid = %d, stderr %q; want 1 and %q", code, stderr.String(), want)
	}
}

func TestRPingInfo(t *testing.T) {
	in := rpingInfo{Addr: 0x00007f1234567890, RKey: 0x1234abcd, Size: 100}
	b := in.marshal()
	const want = "00007f1234567890" + "1234abcd" + "00000064"
	if got := hex.EncodeToString(b[:]); got != want {
		t.Errorf("marshal(%+v) = %s, want %s", in, got, want)
	}
	got, err := parseRPingInfo(b[:])
	if err != nil || got != in {
		t.Errorf("parseRPingInfo(%s) = %+v, %v; want %+v", want, got, err, in)
	}
	for _, n := range []int{0, 15, 17, 64} {
		if _, err := parseRPingInfo(make([]byte, n)); err == nil || !strings.Contains(err.Error(), "received bogus data") {
			t.Errorf("parseRPingInfo of %d bytes: %v, want bogus data", n, err)
		}
	}
	if got, want := in.String(), "rkey 1234abcd addr 7f1234567890 len 100"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// FuzzParseRPingInfo: the decoder of what the peer sends takes any bytes
// without panicking, accepts exactly 16, and round-trips them.
func FuzzParseRPingInfo(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, rpingInfoLen))
	f.Add(bytes.Repeat([]byte{0xff}, rpingInfoLen))
	f.Add([]byte("0123456789abcdefg"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := parseRPingInfo(b)
		if (err == nil) != (len(b) == rpingInfoLen) {
			t.Fatalf("%d bytes: error %v", len(b), err)
		}
		if err != nil {
			return
		}
		if m := in.marshal(); !bytes.Equal(m[:], b) {
			t.Fatalf("round trip of %x gave %x", b, m)
		}
	})
}

// TestRPingFill compares the ping data with rping's: the lines rping -v
// prints (rdma-core 44's, seen in the test VM for -S 64 and -S 100), the
// wrap of the starting letter after 58 pings, and the smallest buffer.
func TestRPingFill(t *testing.T) {
	tests := []struct {
		size int
		ping int64
		want string // up to the NUL
	}{
		{64, 0, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"},
		{64, 1, "rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs"},
		{64, 57, "rdma-ping-57: zABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnop"},
		{64, 58, "rdma-ping-58: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopq"},
		{100, 0, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ[\\"},
		{100, 2, "rdma-ping-2: CDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^"},
		{23, 0, "rdma-ping-0: ABCDEFGHI"},
		{23, 2147483647, "rdma-ping-2147483647: "},
		// A C int wraps; snprintf truncates to the buffer.
		{23, 1 << 31, "rdma-ping--2147483648:"},
		{30, 1 << 31, "rdma-ping--2147483648: IJKLMN"},
	}
	for _, tt := range tests {
		buf := bytes.Repeat([]byte{0xee}, tt.size)
		rpingFill(buf, tt.ping)
		if got := string(cString(buf)); got != tt.want {
			t.Errorf("size %d ping %d: %q, want %q", tt.size, tt.ping, got, tt.want)
		}
		if buf[tt.size-1] != 0 {
			t.Errorf("size %d ping %d: last byte %#x, want NUL", tt.size, tt.ping, buf[tt.size-1])
		}
		// Past the text's NUL only rping's own bytes: the pattern
		// (or snprintf's NUL), nothing left over.
		if i := bytes.IndexByte(buf, 0xee); i >= 0 {
			t.Errorf("size %d ping %d: byte %d not written", tt.size, tt.ping, i)
		}
	}
	// The whole buffer, as memcmp sees it with -V.
	buf := make([]byte, 64)
	rpingFill(buf, 0)
	if want := tests[0].want + "\x00"; string(buf) != want {
		t.Errorf("size 64 ping 0: %q, want %q", buf, want)
	}
}

func TestCString(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""}, {"abc", "abc"}, {"ab\x00cd", "ab"}, {"\x00", ""},
	} {
		if got := string(cString([]byte(tt.in))); got != tt.want {
			t.Errorf("cString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
