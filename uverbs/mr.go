package uverbs

// MR is a registered memory region (ibv_mr). (Being written: RegMR,
// Rereg, Close, buffers.)
type MR struct {
	resource
	lkey, rkey uint32
	addr       uint64
	length     uint64
}

// LKey is the key local work requests use to name the region.
func (mr *MR) LKey() uint32 { return mr.lkey }

// RKey is the key remote peers use to access the region.
func (mr *MR) RKey() uint32 { return mr.rkey }
