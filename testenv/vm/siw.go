package vm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// Soft-iWARP (siw) is not built by Debian (CONFIG_RDMA_SIW is not set in
// either test kernel), so the VM loads a siw.ko built here from Debian's
// kernel source, against the booted kernel's own headers: the same
// version, configuration, vermagic and symbol CRCs as the image, so the
// unmodified kernel loads it. It is built once per kernel package and kept
// beside it in the cache (SiwModule).

// SiwModule returns the path of siw.ko for k, building it on first use
// from the Debian packages linux-source-X.Y and linux-headers-<release> of
// the image's own Debian version (and the headers' linux-headers-*-common
// and linux-kbuild-* dependencies). The build needs apt-get, dpkg-deb, tar
// with xz, make and the compiler the kernel was built with (gcc-12 for
// both test kernels); a missing one is named in the error.
func SiwModule(ctx context.Context, k Kernel, logf func(string, ...any)) (string, error) {
	ko := filepath.Join(filepath.Dir(k.Dir), "siw-"+k.Package, "siw.ko")
	if _, err := os.Stat(ko); err == nil {
		return ko, nil
	}
	unlock, err := lockFile(filepath.Join(filepath.Dir(k.Dir), ".lock-siw"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(ko); err == nil {
		return ko, nil
	}
	logf("rxevm: building siw.ko for %s (first use)", k.Release)
	if err := buildSiw(ctx, k, filepath.Dir(ko)); err != nil {
		return "", fmt.Errorf("rxevm: building siw.ko for %s: %w", k.Release, err)
	}
	return ko, nil
}

// siwTools are the programs the build runs, with the Debian package each
// comes from.
var siwTools = [][2]string{
	{"apt-get", "apt"}, {"dpkg-deb", "dpkg"}, {"tar", "tar"}, {"xz", "xz-utils"},
	{"make", "make"}, {"gcc-12", "gcc-12"},
}

func buildSiw(ctx context.Context, k Kernel, dst string) error {
	var missing []string
	for _, t := range siwTools {
		if _, err := exec.LookPath(t[0]); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", t[0], t[1]))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s; scripts/install-deps installs them", strings.Join(missing, ", "))
	}
	ver, err := imageVersion(k)
	if err != nil {
		return err
	}
	mm := regexp.MustCompile(`^[0-9]+\.[0-9]+`).FindString(k.Release)
	if mm == "" {
		return fmt.Errorf("kernel release %q has no version", k.Release)
	}

	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".siw-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	debs := filepath.Join(tmp, "debs")
	root := filepath.Join(tmp, "root")
	for _, d := range []string{debs, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	headers := "linux-headers-" + k.Release
	if err := aptDownload(ctx, debs, headers+"="+ver, "linux-source-"+mm+"="+ver); err != nil {
		return err
	}
	// The headers package names its common half and its kbuild tools.
	hdeb, err := filepath.Glob(filepath.Join(debs, headers+"_*.deb"))
	if err != nil || len(hdeb) != 1 {
		return fmt.Errorf("apt-get download %s left %d packages", headers, len(hdeb))
	}
	out, err := exec.CommandContext(ctx, "dpkg-deb", "-f", hdeb[0], "Depends").Output()
	if err != nil {
		return fmt.Errorf("dpkg-deb -f %s Depends: %w", hdeb[0], err)
	}
	deps, err := headerDeps(string(out), ver)
	if err != nil {
		return fmt.Errorf("%s: %w", headers, err)
	}
	if err := aptDownload(ctx, debs, deps...); err != nil {
		return err
	}
	all, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	for _, d := range all {
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", d, root).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg-deb -x %s: %v: %s", d, err, bytes.TrimSpace(out))
		}
	}

	// The headers' Makefile includes its common half by absolute path
	// (/usr/src/...); point it into the unpacked tree.
	hdir := filepath.Join(root, "usr", "src", headers)
	mk := filepath.Join(hdir, "Makefile")
	b, err := os.ReadFile(mk)
	if err != nil {
		return err
	}
	b = bytes.ReplaceAll(b, []byte("include /usr/src/"), []byte("include "+filepath.Join(root, "usr", "src")+"/"))
	if err := os.WriteFile(mk, b, 0o644); err != nil {
		return err
	}

	// Only the driver's own folder of the source tarball.
	src := "linux-source-" + mm
	tarball := filepath.Join(root, "usr", "src", src+".tar.xz")
	siwDir := src + "/drivers/infiniband/sw/siw"
	untar := exec.CommandContext(ctx, "tar", "-xJf", tarball, "-C", tmp, "--wildcards", siwDir+"/*")
	if out, err := untar.CombinedOutput(); err != nil {
		return fmt.Errorf("tar -xJf %s %s: %v: %s", tarball, siwDir, err, bytes.TrimSpace(out))
	}
	m := filepath.Join(tmp, siwDir)
	// No BTF for the module: it needs pahole, and nothing here reads it.
	build := exec.CommandContext(ctx, "make", "-C", hdir, "M="+m, "CONFIG_RDMA_SIW=m", "CONFIG_DEBUG_INFO_BTF_MODULES=",
		fmt.Sprintf("-j%d", runtime.NumCPU()), "modules")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("make siw.ko: %v:\n%s", err, tail(out, 40))
	}
	ko, err := os.ReadFile(filepath.Join(m, "siw.ko"))
	if err != nil {
		return err
	}
	if err := checkVermagic(ko, k.Release); err != nil {
		return err
	}
	stage := filepath.Join(tmp, "out")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, "siw.ko"), ko, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, "version"), []byte(ver+"\n"), 0o644); err != nil {
		return err
	}
	os.RemoveAll(dst)
	return os.Rename(stage, dst)
}

// imageVersion reads the Debian version of k's image package from the
// first line of its changelog, "linux (6.1.192-2) ...".
func imageVersion(k Kernel) (string, error) {
	logs, _ := filepath.Glob(filepath.Join(k.Dir, "usr", "share", "doc", "*", "changelog.Debian.gz"))
	if len(logs) == 0 {
		return "", fmt.Errorf("%s has no usr/share/doc/*/changelog.Debian.gz to take its version from", k.Dir)
	}
	f, err := os.Open(logs[0])
	if err != nil {
		return "", err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", logs[0], err)
	}
	line, _ := bufio.NewReader(z).ReadString('\n')
	v := regexp.MustCompile(`^\S+ \(([^)]+)\)`).FindStringSubmatch(line)
	if v == nil {
		return "", fmt.Errorf("%s: first line %q names no version", logs[0], strings.TrimSpace(line))
	}
	return v[1], nil
}

// headerDeps picks the linux-headers-*-common and linux-kbuild-* packages
// out of a headers package's Depends field, pinned to ver.
func headerDeps(depends, ver string) ([]string, error) {
	var pkgs []string
	for _, alt := range strings.Split(depends, ",") {
		for _, d := range strings.Split(alt, "|") {
			name := strings.Fields(strings.TrimSpace(d))
			if len(name) == 0 {
				continue
			}
			if (strings.HasPrefix(name[0], "linux-headers-") && strings.HasSuffix(name[0], "-common")) ||
				strings.HasPrefix(name[0], "linux-kbuild-") {
				pkgs = append(pkgs, name[0]+"="+ver)
			}
		}
	}
	if len(pkgs) != 2 {
		return nil, fmt.Errorf("Depends %q: want one linux-headers-*-common and one linux-kbuild-*, found %v", strings.TrimSpace(depends), pkgs)
	}
	return pkgs, nil
}

func aptDownload(ctx context.Context, dir string, pkgs ...string) error {
	dl := exec.CommandContext(ctx, "apt-get", append([]string{"download", "-q"}, pkgs...)...)
	dl.Dir = dir
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v: %s", strings.Join(pkgs, " "), err, tail(out, 10))
	}
	return nil
}

// checkVermagic refuses a module the kernel would refuse.
func checkVermagic(ko []byte, release string) error {
	i := bytes.Index(ko, []byte("vermagic="))
	if i < 0 {
		return fmt.Errorf("siw.ko has no vermagic")
	}
	v := ko[i+len("vermagic="):]
	if j := bytes.IndexByte(v, 0); j >= 0 {
		v = v[:j]
	}
	if !bytes.HasPrefix(v, []byte(release+" ")) {
		return fmt.Errorf("siw.ko's vermagic %q is not for %s", v, release)
	}
	return nil
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
