package uverbs

import (
	"fmt"
	"net/netip"
	"os"
)

// findGIDIndex finds gid in the port's GID table with a RoCE v2 type, or
// with an IB / RoCE v1 type (what ibv_find_gid_index calls
// IBV_GID_TYPE_SYSFS_IB_ROCE_V1).
func (c *Context) findGIDIndex(port int, gid GID, roceV2 bool) (int, error) {
	table, err := c.GIDTable(port)
	if err != nil {
		return 0, err
	}
	for _, e := range table {
		if e.GID == gid && (e.Type == GIDTypeRoCEv2) == roceV2 {
			return e.Index, nil
		}
	}
	kind := "RoCE v2"
	if !roceV2 {
		kind = "IB/RoCE v1"
	}
	return 0, fmt.Errorf("uverbs InitAHFromWC: %s port %d has no %s GID %s: %w", c.dev.Name, port, kind, netip.AddrFrom16(gid), os.ErrNotExist)
}
