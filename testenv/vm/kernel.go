package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Kernel is a Debian kernel package unpacked in the cache.
type Kernel struct {
	Package string // e.g. linux-image-6.1.0-56-amd64-unsigned
	Release string // uname -r, e.g. 6.1.0-56-amd64
	Dir     string // the unpacked package
}

// Vmlinuz is the kernel image.
func (k Kernel) Vmlinuz() string { return filepath.Join(k.Dir, "boot", "vmlinuz-"+k.Release) }

// ModulesDir is /lib/modules/<release> inside the package.
func (k Kernel) ModulesDir() string { return filepath.Join(k.Dir, "lib", "modules", k.Release) }

// CacheDir is where kernels and initramfs images are kept:
// $PURERDMA_CACHE, else the user cache dir.
func CacheDir() (string, error) {
	if d := os.Getenv("PURERDMA_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("rxevm: no cache directory (set PURERDMA_CACHE): %w", err)
	}
	return filepath.Join(d, "purerdma"), nil
}

// packagePattern maps a short kernel name (6.1, 6.12) to the Debian
// packages that carry it; the newest one is used.
func packagePattern(flavor string) (*regexp.Regexp, error) {
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+$`).MatchString(flavor) {
		return nil, fmt.Errorf("rxevm: kernel %q: want a version like 6.1 or 6.12, or a package name linux-image-*", flavor)
	}
	return regexp.MustCompile(`^linux-image-` + regexp.QuoteMeta(flavor) + `\.[0-9]+(-[0-9]+|\+deb[0-9]+)-amd64-unsigned$`), nil
}

// ResolveKernel returns the unpacked kernel for flavor ("6.1", "6.12" or a
// package name), downloading and unpacking it on first use. A flavor that
// was resolved before is reused without asking apt, so later runs are
// offline; refresh asks apt for the newest package again.
func ResolveKernel(ctx context.Context, flavor string, refresh bool, logf func(string, ...any)) (Kernel, error) {
	cache, err := CacheDir()
	if err != nil {
		return Kernel{}, err
	}
	dir := filepath.Join(cache, "kernels")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Kernel{}, fmt.Errorf("rxevm: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return Kernel{}, err
	}
	defer unlock()

	current := filepath.Join(dir, flavor+".current")
	pkg := flavor
	if !strings.HasPrefix(flavor, "linux-image-") {
		b, err := os.ReadFile(current)
		pkg = strings.TrimSpace(string(b))
		if err != nil || refresh || pkg == "" {
			if pkg, err = newestPackage(ctx, flavor); err != nil {
				return Kernel{}, err
			}
		}
	}
	k := Kernel{Package: pkg, Dir: filepath.Join(dir, pkg)}
	if _, err := os.Stat(filepath.Join(k.Dir, ".complete")); err != nil {
		logf("rxevm: fetching kernel package %s (first use)", pkg)
		if err := fetchPackage(ctx, pkg, k.Dir); err != nil {
			return Kernel{}, err
		}
	}
	if k.Release, err = kernelRelease(k.Dir); err != nil {
		return Kernel{}, err
	}
	if !strings.HasPrefix(flavor, "linux-image-") {
		if err := os.WriteFile(current, []byte(pkg+"\n"), 0o644); err != nil {
			return Kernel{}, fmt.Errorf("rxevm: %w", err)
		}
	}
	return k, nil
}

func kernelRelease(dir string) (string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "lib", "modules"))
	if err != nil || len(ents) != 1 {
		return "", fmt.Errorf("rxevm: %s: want exactly one lib/modules/<release> (err %v)", dir, err)
	}
	return ents[0].Name(), nil
}

// newestPackage asks apt-cache for the packages of flavor and picks the
// highest version. The package lists are refreshed once if nothing matches.
func newestPackage(ctx context.Context, flavor string) (string, error) {
	re, err := packagePattern(flavor)
	if err != nil {
		return "", err
	}
	find := func() ([]string, error) {
		out, err := exec.CommandContext(ctx, "apt-cache", "pkgnames", "linux-image-"+flavor+".").Output()
		if err != nil {
			return nil, fmt.Errorf("rxevm: apt-cache pkgnames: %w", err)
		}
		var names []string
		for _, n := range strings.Fields(string(out)) {
			if re.MatchString(n) {
				names = append(names, n)
			}
		}
		return names, nil
	}
	names, err := find()
	if err == nil && len(names) == 0 {
		if out, uerr := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("rxevm: no package for kernel %s and apt-get update failed: %v: %s", flavor, uerr, out)
		}
		names, err = find()
	}
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", fmt.Errorf("rxevm: no Debian package matches %s", re)
	}
	best := names[0]
	for _, n := range names[1:] {
		if versionLess(best, n) {
			best = n
		}
	}
	return best, nil
}

var numRun = regexp.MustCompile(`[0-9]+|[^0-9]+`)

// versionLess compares package names piecewise, numbers as numbers
// (6.1.0-9 < 6.1.0-56, 6.12.107 < 6.12.117).
func versionLess(a, b string) bool {
	pa, pb := numRun.FindAllString(a, -1), numRun.FindAllString(b, -1)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			return na < nb
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

func fetchPackage(ctx context.Context, pkg, dst string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".fetch-")
	if err != nil {
		return fmt.Errorf("rxevm: %w", err)
	}
	defer os.RemoveAll(tmp)
	dl := exec.CommandContext(ctx, "apt-get", "download", pkg)
	dl.Dir = tmp
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("rxevm: apt-get download %s: %v: %s", pkg, err, bytes.TrimSpace(out))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("rxevm: apt-get download %s left %d .deb files", pkg, len(debs))
	}
	unpacked := filepath.Join(tmp, "root")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], unpacked).CombinedOutput(); err != nil {
		return fmt.Errorf("rxevm: dpkg-deb -x %s: %v: %s", debs[0], err, bytes.TrimSpace(out))
	}
	if err := os.WriteFile(filepath.Join(unpacked, ".complete"), nil, 0o644); err != nil {
		return fmt.Errorf("rxevm: %w", err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("rxevm: %w", err)
	}
	return os.Rename(unpacked, dst)
}

// lockFile takes an exclusive flock so parallel runs (go test -p N) fetch
// and build each artifact once.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("rxevm: lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rxevm: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
