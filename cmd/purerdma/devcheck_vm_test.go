package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli/clitest"
	"github.com/purerdma/rdma/testenv"
)

// TestServersCheckTheDevice runs each server side, as a process of its
// own, with a device name that does not exist or an address that no
// RDMA device has: each must exit by itself, well within
// clitest.DeviceCheckTimeout, with status 1 and an error naming what it was
// given and listing the VM's devices, instead of waiting for a client.
func TestServersCheckTheDevice(t *testing.T) {
	testenv.Devices(t, 2)
	port := strconv.Itoa(ppNextPort()) // a server that waited would listen there
	notFound := []string{`no RDMA device named "nosuch"`, "rxe0 (veth0 198.18.0.1", "rxe1 (veth1 198.18.0.2"}
	noAddr := []string{"no RDMA device has the address 198.18.0.99", "rxe0 (veth0 198.18.0.1", "rxe1 (veth1 198.18.0.2"}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"bench", "write_lat", "-d", "nosuch", "-p", port}, notFound},
		{[]string{"bench", "send_bw", "-d", "nosuch", "-p", port}, notFound},
		{[]string{"bench", "connect", "-b", "198.18.0.99", "-p", port}, noAddr},
		{[]string{"ping", "-s", "-a", "198.18.0.99", "-p", port}, noAddr},
		{[]string{"ping", "-s", "-P", "-a", "198.18.0.99", "-p", port}, noAddr},
		{[]string{"devinfo", "-d", "nosuch"}, notFound},
	}
	for _, kind := range []string{"rc", "uc", "ud", "srq"} {
		tests = append(tests, struct {
			args []string
			want []string
		}{[]string{"pingpong", kind, "-d", "nosuch", "-g", "1", "-p", port}, append([]string{"IB device nosuch not found"}, notFound...)})
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), clitest.DeviceCheckTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), mainEnv+"=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("still running after %v (killed); stderr %q", clitest.DeviceCheckTimeout, stderr.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1", err)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
		})
	}
}
