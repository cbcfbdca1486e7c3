package uverbs

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// GID types as sysfs names them (gid_attrs/types/N).
const (
	gidTypeRoCEv2   = "RoCE v2"
	gidTypeIBRoCEv1 = "IB/RoCE v1"
)

// findGIDIndex finds gid of the given type in the port's GID table, from
// sysfs like rdma-core's ibv_find_gid_index.
func (c *Context) findGIDIndex(port int, gid GID, typ string) (int, error) {
	dir := filepath.Join(sysfsRoot, "class/infiniband", c.dev.Name, "ports", strconv.Itoa(port))
	ents, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return 0, fmt.Errorf("uverbs: GID table of %s port %d: %w", c.dev.Name, port, err)
	}
	want := netip.AddrFrom16(gid)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, "gids", e.Name()))
		if err != nil {
			continue
		}
		a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
		if err != nil || a != want {
			continue
		}
		t, err := os.ReadFile(filepath.Join(dir, "gid_attrs/types", e.Name()))
		if err != nil || strings.TrimSpace(string(t)) != typ {
			continue
		}
		return strconv.Atoi(e.Name())
	}
	return 0, fmt.Errorf("uverbs: %s port %d has no %s GID %s: %w", c.dev.Name, port, typ, want, os.ErrNotExist)
}
