package vm

import (
	"bufio"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// initScript is the VM's first process: load modules, mount the host's
// root read-only under a tmpfs overlay (host paths stay valid and writes
// are thrown away), then chroot and exec the runner's guest half.
//
//go:embed init.sh
var initScript string

// busyboxPath is Debian busybox-static's binary.
const busyboxPath = "/bin/busybox"

// buildInitramfs writes (once per input set) an uncompressed initramfs
// for k and returns its path. Uncompressed because decompressing it
// under TCG costs more than reading it.
func buildInitramfs(k Kernel, siw string) (string, error) {
	mods, err := resolveModules(k.ModulesDir(), map[string]string{"siw": siw}, bootModules)
	if err != nil {
		return "", err
	}
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		return "", fmt.Errorf("rxevm: busybox-static is needed (scripts/install-deps): %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%x\x00", initScript, sha256.Sum256(bb))
	var order []string
	for _, m := range mods {
		order = append(order, m.name+".ko")
		fmt.Fprintf(h, "%s\x00%x\x00", m.name, sha256.Sum256(m.data))
	}
	path := filepath.Join(k.Dir, "initramfs-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}

	tmp, err := os.CreateTemp(k.Dir, ".initramfs-")
	if err != nil {
		return "", fmt.Errorf("rxevm: %w", err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	c := &cpioWriter{w: bw}
	for _, d := range []string{"bin", "dev", "proc", "sys", "host", "out", "rw", "newroot", "lib", "lib/modules"} {
		c.Dir(d)
	}
	c.File("bin/busybox", 0o755, bb)
	c.Symlink("bin/sh", "busybox")
	c.File("init", 0o755, []byte(initScript))
	for _, m := range mods {
		c.File("lib/modules/"+m.name+".ko", 0o644, m.data)
	}
	c.File("modules.order", 0o644, []byte(strings.Join(order, "\n")+"\n"))
	if err := c.Close(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("rxevm: initramfs: %w", err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("rxevm: initramfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("rxevm: initramfs: %w", err)
	}
	return path, os.Rename(tmp.Name(), path)
}
