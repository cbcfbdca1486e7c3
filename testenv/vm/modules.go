package vm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// bootModules are the modules the VM needs, roots only: their
// dependencies are read from each module's .modinfo. Debian's packages
// ship no modules.dep (depmod runs at install time), so we resolve
// ourselves. Modules built into a kernel are skipped.
var bootModules = []string{
	// rxe asks the crypto API for "crc32"; with no modprobe in the
	// initramfs it must already be loaded, or adding a link fails ENOENT.
	"crc32_generic",
	"virtio_pci", "9pnet_virtio", "9p", "overlay",
	"ib_uverbs", "rdma_ucm", "rdma_rxe",
	// siw (built here, SiwModule) checksums MPA frames with the crypto
	// API's "crc32c", which must be loaded before it for the same reason.
	"crc32c_generic", "siw",
	"veth", "dummy",
	// The two-VM bed's links (rxevm -peer), and netem for the faults
	// put on them (testenv.Peer.LinkFault).
	"virtio_net", "sch_netem",
	// Persistent memory: the NVDIMM (nfit, nd_pmem) as device DAX.
	"nfit", "nd_pmem", "dax_pmem", "device_dax",
}

// module is one loadable module, ready to go into the initramfs.
type module struct {
	name string
	data []byte // decompressed .ko
}

// resolveModules returns the modules needed for roots in load order
// (dependencies first). extra names modules outside modDir (siw.ko) by
// name.
func resolveModules(modDir string, extra map[string]string, roots []string) ([]module, error) {
	files := map[string]string{} // normalized name -> path
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		base := d.Name()
		for _, ext := range []string{".ko", ".ko.xz"} {
			if strings.HasSuffix(base, ext) {
				files[normalizeModule(strings.TrimSuffix(base, ext))] = p
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rxevm: modules: %w", err)
	}
	for name, p := range extra {
		files[normalizeModule(name)] = p
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[normalizeModule(strings.TrimSuffix(filepath.Base(l), ".ko"))] = true
		}
	}

	var order []module
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		name = normalizeModule(name)
		switch state[name] {
		case 1:
			return fmt.Errorf("rxevm: module dependency cycle at %s", name)
		case 2:
			return nil
		}
		path, ok := files[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			return fmt.Errorf("rxevm: module %s (needed by %s) is neither in %s nor built in", name, from, modDir)
		}
		state[name] = 1
		data, err := readModule(path)
		if err != nil {
			return err
		}
		deps, err := moduleDepends(data)
		if err != nil {
			return fmt.Errorf("rxevm: %s: %w", path, err)
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, module{name: name, data: data})
		return nil
	}
	for _, r := range roots {
		if err := visit(r, "the VM"); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func normalizeModule(name string) string { return strings.ReplaceAll(name, "-", "_") }

// readModule returns a module's ELF bytes; Debian 6.12 ships them xz
// compressed and busybox insmod wants them plain.
func readModule(path string) ([]byte, error) {
	if !strings.HasSuffix(path, ".xz") {
		return os.ReadFile(path)
	}
	out, err := exec.Command("xz", "-dc", path).Output()
	if err != nil {
		return nil, fmt.Errorf("rxevm: xz -dc %s: %w", path, err)
	}
	return out, nil
}

// moduleDepends reads "depends=a,b" from the .modinfo section.
func moduleDepends(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, err
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("no .modinfo section")
	}
	info, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(info, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}
