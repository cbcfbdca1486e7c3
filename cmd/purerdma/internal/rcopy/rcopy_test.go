package rcopy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRcopyArgs: rcopy's two command lines, and what they refuse.
func TestRcopyArgs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want rcOptions
	}{
		{nil, rcOptions{port: 7427, isServer: true}},
		{[]string{"-p", "7000", "-n3"}, rcOptions{port: 7000, count: 3, isServer: true}},
		{[]string{"a.txt", "host"}, rcOptions{port: 7427, src: "a.txt", server: "host", dst: "a.txt"}},
		{[]string{"a.txt", "host:/tmp/b", "-p7001"}, rcOptions{port: 7001, src: "a.txt", server: "host", dst: "/tmp/b"}},
		{[]string{"a.txt", "host:"}, rcOptions{port: 7427, src: "a.txt", server: "host", dst: "a.txt"}},
	} {
		got, err := parseRcopyArgs(tt.args)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(rcOptions{})); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.args, diff)
		}
	}
	for _, bad := range [][]string{
		{"a.txt"}, {"a.txt", ":/tmp/b"}, {"-p", "0"}, {"-p"}, {"-x", "1"}, {"-n", "-1"},
		{"a.txt", "host", "-n", "1"}, // -n is the server's
		{"a.txt", "host", "extra"},
	} {
		if _, err := parseRcopyArgs(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// TestRcHdr: struct msg_hdr's layout, in the host's byte order.
func TestRcHdr(t *testing.T) {
	h := rcHdr{Command: rcCmdWrite | rcCmdResp, Len: 24, Data: 2, ID: 0x0102030405060708}
	var b [rcHdrLen]byte
	h.marshal(b[:])
	if got := parseRcHdr(b[:]); got != h {
		t.Errorf("round trip %+v, want %+v", got, h)
	}
	if b[1] != 0x83 || b[0] != 0 {
		t.Errorf("version and command bytes % x", b[:2])
	}
}
